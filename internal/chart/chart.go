// Package chart renders bpfperf's Helm chart (charts/bpfperf) with the
// pinned helm (tools/helm) and reads back what it made: every object
// decoded strictly with the Kubernetes API types, so a misspelt or
// misplaced field fails, and the DaemonSet's pod turned into what the
// test node (internal/node) runs, so the chart's own pod spec, not one
// written again by hand, is what runs there.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	// HelmEnv names a helm binary to use instead of the pinned one.
	HelmEnv = "BPFPERF_HELM"
	// CacheEnv is where the pinned helm is built and kept; DefaultCache
	// when unset. .ci/deps builds it there.
	CacheEnv     = "BPFPERF_TOOLS_CACHE"
	DefaultCache = "/var/cache/bpfperf-tools"
	// KubeVersion is the Kubernetes version the chart is rendered and
	// linted for: the oldest its Chart.yaml accepts. A helm built from
	// source, not by Helm's release builds (which set it at link time),
	// would otherwise assume v1.20.
	KubeVersion = "1.25.0"
)

var (
	// ErrNoHelm: no helm binary could be had (none named, and the pinned
	// version could not be built: no Go module proxy, say).
	ErrNoHelm = errors.New("no helm")
	// ErrRender: helm refused the chart or its values.
	ErrRender = errors.New("helm template")
)

// HelmVersion is the helm version tools/helm pins, from its go.mod.
func HelmVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "tools", "helm", "go.mod"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^(?:require)?\s+helm\.sh/helm/v3 (v\S+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("tools/helm/go.mod requires no helm.sh/helm/v3")
	}
	return string(m[1]), nil
}

// Helm returns a helm binary: $BPFPERF_HELM if set, else the version
// tools/helm pins, built into the cache directory the first time (Go
// builds it from the module proxy; a few minutes on two CPUs) and kept
// there, as the VM tests keep their kernels. root is the repository.
func Helm(root string) (string, error) {
	if p := os.Getenv(HelmEnv); p != "" {
		return p, nil
	}
	version, err := HelmVersion(root)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoHelm, err)
	}
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		dir = DefaultCache
	}
	bin := filepath.Join(dir, "helm-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoHelm, err)
	}
	// Built beside, then renamed: a build cut short leaves no binary
	// that a later run would take for a whole one.
	tmp := bin + ".tmp"
	cmd := exec.Command("go", "-C", filepath.Join(root, "tools", "helm"), "build", "-trimpath", "-o", tmp, "helm.sh/helm/v3/cmd/helm")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: build helm %s: %w\n%s", ErrNoHelm, version, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoHelm, err)
	}
	return bin, nil
}

// Objects is what `helm template` made, each decoded strictly.
type Objects struct {
	DaemonSet      *appsv1.DaemonSet
	ServiceAccount *corev1.ServiceAccount
	Service        *corev1.Service
	// ServiceMonitor has no type here (the Prometheus Operator's CRD):
	// it is decoded into maps.
	ServiceMonitor map[string]any
	// Dashboard is the Grafana dashboard's ConfigMap (opt-in).
	Dashboard *corev1.ConfigMap
	// Kinds are every object's kind, in the order rendered.
	Kinds []string
}

// Render runs `helm template` on the chart at dir as release "bpfperf" in
// namespace "monitoring" with values args (--set k=v, -f file) and
// decodes each object. An object of a kind the chart should not make, or
// a field its type does not have, is an error.
func Render(helm, dir string, args ...string) (*Objects, error) {
	cmd := exec.Command(helm, append([]string{"template", "bpfperf", dir, "--namespace", "monitoring", "--kube-version", KubeVersion}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %s", ErrRender, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return Decode(out)
}

// docSep splits a YAML stream into its documents.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Decode decodes a stream of rendered objects.
func Decode(stream []byte) (*Objects, error) {
	objs := &Objects{}
	for _, doc := range docSep.Split(string(stream), -1) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("rendered object: %w\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // comments only
		}
		objs.Kinds = append(objs.Kinds, head.Kind)
		var into any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 DaemonSet":
			objs.DaemonSet = &appsv1.DaemonSet{}
			into = objs.DaemonSet
		case "v1 ServiceAccount":
			objs.ServiceAccount = &corev1.ServiceAccount{}
			into = objs.ServiceAccount
		case "v1 Service":
			objs.Service = &corev1.Service{}
			into = objs.Service
		case "v1 ConfigMap":
			objs.Dashboard = &corev1.ConfigMap{}
			into = objs.Dashboard
		case "monitoring.coreos.com/v1 ServiceMonitor":
			into = &objs.ServiceMonitor
		default:
			return nil, fmt.Errorf("rendered %s %s: the chart makes no such object", head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return nil, fmt.Errorf("rendered %s: %w\n%s", head.Kind, err, doc)
		}
	}
	return objs, nil
}

// Lint runs `helm lint --strict` on the chart at dir with values args and
// returns what it said.
func Lint(helm, dir string, args ...string) (string, error) {
	out, err := exec.Command(helm, append([]string{"lint", "--strict", "--kube-version", KubeVersion, dir}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm lint: %w: %s", err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Container is the DaemonSet's bpfperfd container.
func (o *Objects) Container() (*corev1.Container, error) {
	if o.DaemonSet == nil {
		return nil, errors.New("the chart rendered no DaemonSet")
	}
	for i, c := range o.DaemonSet.Spec.Template.Spec.Containers {
		if c.Name == "bpfperfd" {
			return &o.DaemonSet.Spec.Template.Spec.Containers[i], nil
		}
	}
	return nil, errors.New("the DaemonSet has no bpfperfd container")
}

// Caps is the capability set the container runs with: what it adds, when
// it drops ALL (what else it might keep is the runtime's default set,
// which this does not guess).
func Caps(c *corev1.Container) ([]string, error) {
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		return nil, errors.New("no capabilities in the security context")
	}
	dropsAll := false
	for _, d := range sc.Capabilities.Drop {
		dropsAll = dropsAll || d == "ALL"
	}
	if !dropsAll {
		return nil, fmt.Errorf("drops %v, not ALL: the runtime's default capabilities stay", sc.Capabilities.Drop)
	}
	var caps []string
	for _, a := range sc.Capabilities.Add {
		caps = append(caps, strings.TrimPrefix(string(a), "CAP_"))
	}
	return caps, nil
}
