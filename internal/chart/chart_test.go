package chart_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/bpfperf/bpfperf/internal/chart"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

const (
	root     = "../.."
	chartDir = root + "/charts/bpfperf"
)

// wantCaps is the chart's capability set: each one proven needed on the
// node by TestCapabilitiesNeeded, and none other added.
var wantCaps = []string{"SYS_ADMIN", "SYSLOG"}

// helm is the pinned helm, or a skip saying why there is none (a fail
// where privileged tests are required: CI builds it in .ci/deps).
func helm(t *testing.T) string {
	t.Helper()
	h, err := chart.Helm(root)
	if err != nil {
		privtest.Skip(t, err.Error())
	}
	return h
}

func render(t *testing.T, args ...string) *chart.Objects {
	t.Helper()
	objs, err := chart.Render(helm(t), chartDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// nonDefault turns on everything that is off by default, and moves what
// can move.
var nonDefault = []string{
	"--set", "metrics.enabled=true",
	"--set", "metrics.serviceMonitor.enabled=true",
	"--set", "metrics.serviceMonitor.labels.release=prom",
	"--set", "metrics.webConfigSecret=bpfperf-web",
	"--set", "metrics.port=9500",
	"--set", "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"--set", "extraCapabilities={SYS_RESOURCE,SYSLOG}",
	"--set", "daemon.stateDir=/data/bpfperf",
	"--set", "daemon.socketDir=/var/run/bpfperf-x/",
	"--set", "daemon.interval=2s",
	"--set", "daemon.hostLockWait=30s",
	"--set", "daemon.extraArgs={--profile.every=0}",
	"--set", "hostMounts.debugfs=/sys/kernel/debug",
	"--set", "hostMounts.bpffs=",
	"--set", "hostNetwork=false",
	"--set", "cri.socketDir=/run/crio",
	"--set", "cri.socketName=crio.sock",
	"--set", "priorityClassName=system-node-critical",
	"--set", "grafana.dashboard.enabled=true",
	"--set", "grafana.dashboard.namespace=grafana",
	"--set", "grafana.dashboard.annotations.grafana_folder=BPF",
}

// TestLint: helm lint --strict passes with the defaults, with every
// option on, and privileged.
func TestLint(t *testing.T) {
	h := helm(t)
	for name, args := range map[string][]string{"defaults": nil, "non-default": nonDefault, "privileged": {"--set", "privileged=true"}} {
		if out, err := chart.Lint(h, chartDir, args...); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("%s: helm lint said:\n%s", name, out)
		}
	}
}

// TestRenderDefaults checks the DaemonSet's pod as installed without
// values: the host's view, least privilege, the probes on the socket.
func TestRenderDefaults(t *testing.T) {
	objs := render(t)
	if want := []string{"ServiceAccount", "DaemonSet"}; !slices.Equal(objs.Kinds, want) {
		t.Errorf("kinds %v, want %v: metrics are opt-in", objs.Kinds, want)
	}
	ds := objs.DaemonSet
	ps := ds.Spec.Template.Spec
	if !ps.HostPID || !ps.HostNetwork {
		t.Errorf("hostPID %v, hostNetwork %v: want both", ps.HostPID, ps.HostNetwork)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token: the daemon reads no Kubernetes API")
	}
	if u := ds.Spec.UpdateStrategy; u.Type != "RollingUpdate" || u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable.String() != "1" || u.RollingUpdate.MaxSurge != nil {
		t.Errorf("update strategy %+v: want RollingUpdate, maxUnavailable 1, no surge", u)
	}
	if !slices.ContainsFunc(ps.Tolerations, func(t corev1.Toleration) bool { return t.Operator == "Exists" && t.Key == "" && t.Effect == "" }) {
		t.Errorf("tolerations %v: want one that tolerates every taint", ps.Tolerations)
	}
	if !subset(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Errorf("selector %v does not select the pod's labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}

	c := container(t, objs)
	if c.Image != "docker.io/bpfperf/bpfperf:0.1.0" {
		t.Errorf("image %s, want the chart's appVersion", c.Image)
	}
	sc := c.SecurityContext
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("privileged, or not said")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("root file system is writable")
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp %v, want RuntimeDefault", sc.SeccompProfile)
	}
	if caps, err := chart.Caps(c); err != nil || !slices.Equal(caps, wantCaps) {
		t.Errorf("capabilities %v (%v), want drop ALL and add %v", caps, err, wantCaps)
	}

	// Every mount is a host path at the same path, the store and the
	// socket's directory the only writable ones; the runtime's socket
	// directory read-only.
	want := map[string]bool{"/var/lib/bpfperf": true, "/run/bpfperf": true, "/sys/fs/bpf": false, "/sys/kernel/tracing": false, "/sys/fs/cgroup": false, "/run/containerd": false}
	got := mounts(t, objs)
	if len(got) != len(want) {
		t.Errorf("mounts %v, want %v", got, want)
	}
	for path, writable := range want {
		if w, ok := got[path]; !ok || w != writable {
			t.Errorf("mount %s: present %v, writable %v; want writable %v", path, ok, w, writable)
		}
	}

	wantArgs := []string{"--state-dir=/var/lib/bpfperf", "--socket=/run/bpfperf/api.sock", "--host-lock=/run/bpfperf/bpfperfd.lock", "--host-lock-wait=2m", "--log-level=info", "--bpffs=/sys/fs/bpf", "--cri.socket=/run/containerd/containerd.sock"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	checkFlags(t, c.Args)

	// Start-up and liveness ask whether the sampler ticks (bpfperf
	// health); readiness whether the API answers.
	status := []string{"/usr/local/bin/bpfperf", "--socket", "/run/bpfperf/api.sock", "status"}
	health := []string{"/usr/local/bin/bpfperf", "--socket", "/run/bpfperf/api.sock", "health"}
	for name, p := range map[string]struct {
		probe *corev1.Probe
		want  []string
	}{"startup": {c.StartupProbe, health}, "liveness": {c.LivenessProbe, health}, "readiness": {c.ReadinessProbe, status}} {
		if got := chart.Probe(p.probe); !slices.Equal(got, p.want) {
			t.Errorf("%s probe runs %q, want %q", name, got, p.want)
		}
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	if len(c.Ports) != 0 || len(c.Env) != 0 {
		t.Errorf("ports %v, env %v: the TCP listener is opt-in", c.Ports, c.Env)
	}
}

// TestRenderNonDefault: metrics with TLS, a ServiceMonitor, the image by
// digest, moved directories and more capabilities all reach the pod.
func TestRenderNonDefault(t *testing.T) {
	objs := render(t, nonDefault...)
	if want := []string{"ServiceAccount", "ConfigMap", "Service", "DaemonSet", "ServiceMonitor"}; !slices.Equal(objs.Kinds, want) {
		t.Errorf("kinds %v, want %v", objs.Kinds, want)
	}
	// The dashboard for Grafana's sidecar: its label, in its namespace,
	// the chart's file as it is.
	file, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "bpfperf.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm := objs.Dashboard; cm.Namespace != "grafana" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "BPF" || cm.Labels["app.kubernetes.io/name"] != "bpfperf" {
		t.Errorf("dashboard ConfigMap %s/%s, labels %v, annotations %v: want namespace grafana, grafana_dashboard 1, folder BPF", cm.Namespace, cm.Name, cm.Labels, cm.Annotations)
	} else if got := cm.Data["bpfperf.json"]; got != strings.TrimSpace(string(file)) || len(cm.Data) != 1 {
		t.Errorf("dashboard ConfigMap's data (%d keys) is not dashboards/bpfperf.json (%d bytes, got %d)", len(cm.Data), len(file), len(got))
	}
	ds := objs.DaemonSet
	ps := ds.Spec.Template.Spec
	c := container(t, objs)
	if c.Image != "docker.io/bpfperf/bpfperf@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("image %s, want by digest", c.Image)
	}
	if ps.HostNetwork || ps.DNSPolicy != "" || ps.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v, dnsPolicy %q, priority class %q", ps.HostNetwork, ps.DNSPolicy, ps.PriorityClassName)
	}
	if caps, err := chart.Caps(c); err != nil || !slices.Equal(caps, append(slices.Clone(wantCaps), "SYS_RESOURCE")) {
		t.Errorf("capabilities %v (%v): want the chart's and SYS_RESOURCE once each", caps, err)
	}
	wantArgs := []string{"--state-dir=/data/bpfperf", "--socket=/var/run/bpfperf-x/api.sock", "--host-lock=/var/run/bpfperf-x/bpfperfd.lock", "--host-lock-wait=30s", "--log-level=info",
		"--interval=2s", "--cri.socket=/run/crio/crio.sock", "--web.listen-address=[$(POD_IP)]:9500", "--web.config.file=/etc/bpfperf/web/web-config.yml", "--profile.every=0"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	checkFlags(t, c.Args)
	if len(c.Env) != 1 || c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %+v: want POD_IP from status.podIP", c.Env)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9500 {
		t.Errorf("ports %+v", c.Ports)
	}
	if got := chart.Probe(c.LivenessProbe); !slices.Equal(got, []string{"/usr/local/bin/bpfperf", "--socket", "/var/run/bpfperf-x/api.sock", "health"}) {
		t.Errorf("liveness probe %q: want the moved socket", got)
	}
	got := mounts(t, objs)
	want := map[string]bool{"/data/bpfperf": true, "/var/run/bpfperf-x/": true, "/sys/kernel/tracing": false, "/sys/kernel/debug": false, "/sys/fs/cgroup": false, "/run/crio": false}
	delete(got, "/etc/bpfperf/web")
	if len(got) != len(want) {
		t.Errorf("host mounts %v, want %v", got, want)
	}
	var secret bool
	for _, v := range ps.Volumes {
		secret = secret || v.Secret != nil && v.Secret.SecretName == "bpfperf-web"
	}
	if !secret {
		t.Error("no volume of the web config's secret")
	}

	svc := objs.Service
	if svc.Spec.ClusterIP != "None" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9500 || svc.Spec.Ports[0].TargetPort.String() != "metrics" || !subset(svc.Spec.Selector, ds.Spec.Template.Labels) {
		t.Errorf("service %+v: want headless, port 9500 to the pod's metrics port, selecting the pods", svc.Spec)
	}
	sm := objs.ServiceMonitor
	spec, _ := sm["spec"].(map[string]any)
	eps, _ := spec["endpoints"].([]any)
	ep, _ := firstMap(eps)
	sel, _ := spec["selector"].(map[string]any)
	match, _ := sel["matchLabels"].(map[string]any)
	labels, _ := sm["metadata"].(map[string]any)["labels"].(map[string]any)
	if ep["port"] != "metrics" || ep["path"] != "/metrics" || labels["release"] != "prom" {
		t.Errorf("service monitor endpoint %v, labels %v", ep, labels)
	}
	for k, v := range match {
		if svc.Labels[k] != v {
			t.Errorf("service monitor selects %s=%v, the service has %q", k, v, svc.Labels[k])
		}
	}
}

// TestRenderPrivileged: privileged is an option, and then the least set
// is not pretended.
func TestRenderPrivileged(t *testing.T) {
	c := container(t, render(t, "--set", "privileged=true"))
	sc := c.SecurityContext
	if sc.Privileged == nil || !*sc.Privileged || sc.Capabilities != nil || sc.AllowPrivilegeEscalation != nil {
		t.Errorf("security context %+v: want privileged alone", sc)
	}
}

// TestRenderRefuses: a ServiceMonitor without its Service is refused with
// the reason.
func TestRenderRefuses(t *testing.T) {
	_, err := chart.Render(helm(t), chartDir, "--set", "metrics.enabled=true", "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false")
	if !errors.Is(err, chart.ErrRender) || !strings.Contains(err.Error(), "needs metrics.service.enabled") {
		t.Errorf("err %v, want the chart's refusal", err)
	}
}

func container(t *testing.T, objs *chart.Objects) *corev1.Container {
	t.Helper()
	c, err := objs.Container()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mounts are the container's mount paths, each whether writable; a host
// path volume must be mounted at its own path (the daemon's flags name
// host paths).
func mounts(t *testing.T, objs *chart.Objects) map[string]bool {
	t.Helper()
	c := container(t, objs)
	vols := map[string]corev1.Volume{}
	for _, v := range objs.DaemonSet.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	got := map[string]bool{}
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		if v.HostPath != nil && v.HostPath.Path != m.MountPath {
			t.Errorf("volume %s: host path %s mounted at %s", m.Name, v.HostPath.Path, m.MountPath)
		}
		got[m.MountPath] = !m.ReadOnly
	}
	return got
}

// checkFlags fails on an argument that is not one of bpfperfd's flags,
// as docs/flags.md lists them (TestFlagsDoc keeps it current).
func checkFlags(t *testing.T, args []string) {
	t.Helper()
	doc, err := os.ReadFile(root + "/docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	daemon, _, _ := strings.Cut(string(doc[strings.Index(string(doc), "## bpfperfd"):]), "\n## ")
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(--[a-z.-]+)`").FindAllStringSubmatch(daemon, -1) {
		flags[m[1]] = true
	}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if !flags[name] {
			t.Errorf("argument %q: bpfperfd has no flag %s (docs/flags.md)", a, name)
		}
	}
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) > 0
}

func firstMap(l []any) (map[string]any, bool) {
	if len(l) == 0 {
		return nil, false
	}
	m, ok := l[0].(map[string]any)
	return m, ok
}
