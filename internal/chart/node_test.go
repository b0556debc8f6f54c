package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/chart"
	"github.com/bpfperf/bpfperf/internal/image"
	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestMain(m *testing.M) { os.Exit(node.Main(m)) }

// imageTag is the tag the test's image is imported under, and the chart
// is rendered with: the chart's own image reference runs.
const imageTag = "charttest"

// built is the image the tests share, built (for this machine only) and
// imported once per test binary.
var built struct {
	once sync.Once
	err  error
}

// nodeWithImage starts the node and imports make image's image into it.
func nodeWithImage(t *testing.T) *node.Node {
	t.Helper()
	privtest.Root(t)
	n := node.Start(t)
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "bpfperf-chart-image-")
		if err != nil {
			built.err = err
			return
		}
		defer os.RemoveAll(dir)
		archive := filepath.Join(dir, "image.tar")
		cfg := image.Config{Root: root, Platforms: []string{"linux/" + runtime.GOARCH}, Version: imageTag, Commit: "test", Created: time.Unix(1764000000, 0).UTC()}
		if _, built.err = image.Build(cfg, filepath.Join(dir, "oci"), archive); built.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		built.err = n.Import(ctx, archive, image.Name+":"+imageTag)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return n
}

// chartPod is a pod of the chart's DaemonSet running on the node, its
// host directories under dir.
type chartPod struct {
	pod    *node.Pod
	objs   *chart.Objects
	socket string // on the host
}

// renderFor renders the chart for the node: the test's image, the store
// and socket directories under dir (a host's /var/lib/bpfperf and
// /run/bpfperf stay untouched), and args.
func renderFor(t *testing.T, dir string, args ...string) *chart.Objects {
	t.Helper()
	base := []string{"--set", "image.tag=" + imageTag,
		"--set", "daemon.stateDir=" + filepath.Join(dir, "state"),
		"--set", "daemon.socketDir=" + filepath.Join(dir, "run"),
		"--set", "daemon.interval=250ms",
		// The node's containerd, where the chart's default is a node's
		// /run/containerd.
		"--set", "cri.socketDir=" + node.Dir,
	}
	return render(t, append(base, args...)...)
}

// runChart runs the rendered DaemonSet's pod as pod name; secrets are
// the Secrets its secret volumes name (name, key, value).
func runChart(t *testing.T, n *node.Node, name string, objs *chart.Objects, secrets ...map[string]map[string][]byte) *chartPod {
	t.Helper()
	env := chart.Env{Fields: map[string]string{"status.podIP": "127.0.0.1"}, VolumeDir: t.TempDir()}
	if len(secrets) > 0 {
		env.Secrets = secrets[0]
	}
	spec, notes, err := chart.Pod(objs.DaemonSet, "monitoring", name, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, note := range notes {
		t.Log(note)
	}
	c, _ := objs.Container()
	var socket string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--socket="); ok {
			socket = v // the pod's path, the host's too: mounted at its own path
		}
	}
	return &chartPod{pod: n.RunPod(t, spec), objs: objs, socket: socket}
}

// client waits for the pod's daemon to answer on the host's socket.
func (p *chartPod) client(t *testing.T, n *node.Node) *api.Client {
	t.Helper()
	ctx := context.Background()
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st, _ := n.Status(ctx, p.pod.Containers[0].ID); st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Fatalf("bpfperfd exited %d:\n%s", st.GetExitCode(), n.Log(ctx, p.pod.Containers[0].ID))
		}
		c, err := api.Dial(p.socket, time.Second)
		if err == nil {
			if _, err = c.Status(); err == nil {
				return c
			}
		}
		last = err
	}
	t.Fatalf("bpfperfd in the pod does not answer on %s: %v\n%s", p.socket, last, n.Log(ctx, p.pod.Containers[0].ID))
	return nil
}

// exec runs cmd in the pod's container, as a kubelet runs an exec probe.
func (p *chartPod) exec(n *node.Node, cmd []string) (int32, string, error) {
	code, stdout, stderr, err := p.execOut(n, cmd)
	return code, string(stdout) + string(stderr), err
}

// started runs the rendered start-up probe until it passes, as a kubelet
// does before it runs the others, for at most a minute; it returns the
// probe's line.
func (p *chartPod) started(t *testing.T, n *node.Node) string {
	t.Helper()
	c, _ := p.objs.Container()
	probe := chart.Probe(c.StartupProbe)
	start := time.Now()
	for {
		code, out, err := p.exec(n, probe)
		if err == nil && code == 0 {
			t.Logf("start-up probe passed %v after the daemon answered: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			return strings.TrimSpace(out)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("start-up probe %q fails a minute after the daemon answered: exit %d, %v %s", probe, code, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// capability numbers (linux/capability.h) of the names a pod spec uses.
var capNumber = map[string]uint{"DAC_READ_SEARCH": 2, "NET_ADMIN": 12, "SYS_PTRACE": 19, "SYS_ADMIN": 21, "SYS_RESOURCE": 24, "SYSLOG": 34, "PERFMON": 38, "BPF": 39}

func capMask(t *testing.T, names []string) uint64 {
	var m uint64
	for _, n := range names {
		bit, ok := capNumber[n]
		if !ok {
			t.Fatalf("capability %s: number not known here", n)
		}
		m |= 1 << bit
	}
	return m
}

// procStatus reads the fields of /proc/PID/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// bpftoolProg is bpftool's view of program id: the oracle outside the
// code under test.
func bpftoolProg(t *testing.T, id uint32) (name string, runCnt uint64) {
	t.Helper()
	out, err := exec.Command("bpftool", "prog", "show", "id", strconv.Itoa(int(id)), "-j").Output()
	if err != nil {
		privtest.Skip(t, fmt.Sprintf("bpftool prog show: %v", err))
	}
	var p struct {
		Name   string `json:"name"`
		RunCnt uint64 `json:"run_cnt"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	return p.Name, p.RunCnt
}

func bpftoolIDs(t *testing.T) map[uint32]bool {
	t.Helper()
	out, err := exec.Command("bpftool", "prog", "show", "-j").Output()
	if err != nil {
		privtest.Skip(t, fmt.Sprintf("bpftool prog show: %v", err))
	}
	var progs []struct {
		ID uint32 `json:"id"`
	}
	if err := json.Unmarshal(out, &progs); err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]bool{}
	for _, p := range progs {
		ids[p.ID] = true
	}
	return ids
}

// ownCgroup is this process's cgroup v2 path.
func ownCgroup(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// TestChartPodOnNode runs the chart's DaemonSet pod, rendered by helm and
// not written again here, on the real containerd node with the image of
// make image. From outside the pod: its bpfperfd runs with exactly the
// chart's capabilities, no new privileges, the runtime's seccomp filter
// and a read-only root; the chart's probe passes; and through the socket
// on the host directory the daemon lists what bpftool lists, counts a
// program's runs as bpftool does, and names its loader and holder by
// host pid and the host's cgroup path. Its listener has the TLS of the
// chart's web config Secret (checkTLSListener), and a profile taken in
// the pod names a host program's source lines (checkProfileLines).
func TestChartPodOnNode(t *testing.T) {
	n := nodeWithImage(t)
	privtest.LockStats(t)
	dir := t.TempDir()
	port := freePort(t)
	// The listener with TLS, through the chart's Secret.
	web := newWebSecret(t)
	p := runChart(t, n, "bpfperf-chart", renderFor(t, dir, "--set", "metrics.enabled=true", "--set", "metrics.port="+strconv.Itoa(port),
		"--set", "metrics.webConfigSecret=bpfperf-web"), map[string]map[string][]byte{"bpfperf-web": web.data})
	client := p.client(t, n)
	pid := p.pod.Containers[0].PID

	st := procStatus(t, pid)
	want := fmt.Sprintf("%016x", capMask(t, wantCaps))
	for _, f := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if st[f] != want {
			t.Errorf("bpfperfd's %s %s, want %s (%v)", f, st[f], want, wantCaps)
		}
	}
	if st["CapAmb"] != "0000000000000000" || st["CapInh"] != "0000000000000000" {
		t.Errorf("ambient %s, inheritable %s: want none", st["CapAmb"], st["CapInh"])
	}
	if st["NoNewPrivs"] != "1" || st["Seccomp"] != "2" {
		t.Errorf("NoNewPrivs %s, Seccomp %s: want 1 and 2 (a filter)", st["NoNewPrivs"], st["Seccomp"])
	}
	if st["Uid"] == "" || strings.Fields(st["Uid"])[0] != "0" {
		t.Errorf("uid %s, want 0", st["Uid"])
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !slices.Contains(strings.Split(f[5], ","), "ro") {
			t.Errorf("root mounted %s, want ro", f[5])
		}
	}

	p.started(t, n)
	c, _ := p.objs.Container()
	for name, probe := range map[string][]string{"liveness": chart.Probe(c.LivenessProbe), "readiness": chart.Probe(c.ReadinessProbe)} {
		start := time.Now()
		if code, out, err := p.exec(n, probe); err != nil || code != 0 {
			t.Errorf("%s probe %q: exit %d, %v\n%s", name, probe, code, err, out)
		}
		t.Logf("%s probe: %v (CRI exec included)", name, time.Since(start).Round(time.Millisecond))
	}

	// The runtime's socket through the chart's read-only mount of its
	// directory: status names it and says nothing of a failure.
	var status api.Status
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		status, err = client.Status()
		if err == nil && strings.HasPrefix(status.Pods, "CRI socket "+node.Socket+": ") && !strings.Contains(status.Pods, "until it answers") {
			t.Logf("status pods: %s", status.Pods)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status pods %q (%v): want the node's CRI socket answering", status.Pods, err)
		}
	}

	// A program loaded now, while the daemon follows loads.
	name := fmt.Sprintf("chart_%d", os.Getpid()%100000)
	prog, err := privtest.LoadSocketFilter(name)
	id := privtest.Keep(t, prog, err)
	if err := privtest.Run(prog, 7); err != nil {
		t.Fatal(err)
	}
	bname, bruns := bpftoolProg(t, id)
	var d api.ProgDetail
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		d, err = client.Show(strconv.Itoa(int(id)))
		if err == nil && d.RunCnt == bruns && d.Loader != nil && len(d.Owners) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d (%s, bpftool: %d runs) in the pod's daemon: %+v, %v", id, bname, bruns, d, err)
		}
	}
	if d.Name != bname || d.RunCnt != 7 {
		t.Errorf("program %d: name %q, %d runs; bpftool: %q, %d runs (7 made)", id, d.Name, d.RunCnt, bname, bruns)
	}
	if d.Loader.PID != os.Getpid() || d.Loader.Cgroup != ownCgroup(t) {
		t.Errorf("loader %+v, want pid %d in cgroup %s (the host's)", *d.Loader, os.Getpid(), ownCgroup(t))
	}
	if !slices.ContainsFunc(d.Owners, func(o api.Owner) bool { return o.PID == os.Getpid() }) {
		t.Errorf("holders %+v, want pid %d", d.Owners, os.Getpid())
	}

	// Every program bpftool lists before and after the daemon's list is
	// in it.
	before := bpftoolIDs(t)
	if _, err := client.Status(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // two ticks: a sweep after the first reading
	rows, err := client.Progs(false)
	if err != nil {
		t.Fatal(err)
	}
	after := bpftoolIDs(t)
	listed := map[uint32]bool{}
	for _, r := range rows {
		listed[r.ID] = true
	}
	for id := range before {
		if after[id] && !listed[id] {
			t.Errorf("bpftool lists program %d before and after; the pod's bpfperf progs does not", id)
		}
	}

	// The opt-in listener, on the pod's address (the host's network:
	// status.podIP is given as 127.0.0.1 here), with the TLS of the
	// chart's Secret: metrics, and GETs only. (Plain HTTP is
	// TestDashboardSeriesOnNode's.)
	checkTLSListener(t, fmt.Sprintf("127.0.0.1:%d", port), web, strconv.Itoa(int(id)))

	s, err := client.Status()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bpfperfd in the pod: %s resident, %s at most (VmHWM), %d programs on the host", procStatus(t, pid)["VmRSS"], procStatus(t, pid)["VmHWM"], s.ProgramsLoaded)
	t.Logf("status in the pod: sweep %s (%s); holders %s; loaders %s", s.Sweep, s.SweepDetail, s.Holders, s.Loaders)
	// What needs CAP_BPF and CAP_PERFMON on the kernel (a tracing
	// program for each iterator, perf events for the load records) runs
	// with CAP_SYS_ADMIN alone, which the kernel takes for both; the host
	// view and tracefs make the rest.
	if s.Sweep != "iter" || !strings.HasPrefix(s.Holders, "iterator") || !strings.HasPrefix(s.Loaders, "following the kernel's load records") || strings.Contains(s.Loaders, "from /proc only") {
		t.Errorf("sweep %q, holders %q, loaders %q: want the iterators and the load records with their commands", s.Sweep, s.Holders, s.Loaders)
	}

	checkProfileLines(t, n, p)
	checkPodLoaderNamed(t, n, client)
}

// checkPodLoaderNamed: a program loaded in another pod of the node (a
// Deployment's, tploader holding a tracepoint program) is named by that
// pod in the chart pod's daemon, through the CRI socket the chart mounts:
// its namespace, pod, uid, container and workload as the CRI lists them
// (the oracle), its loader the container's host pid, and its identity's
// runner the workload's container.
func checkPodLoaderNamed(t *testing.T, n *node.Node, client *api.Client) {
	t.Helper()
	privtest.Tracefs(t)
	name := fmt.Sprintf("chartpod_%d", os.Getpid()%100000)
	lp := n.RunPod(t, node.PodSpec{
		Namespace: "ns-a", Name: "loader-7d9f8b6c5-x2k4p", Labels: map[string]string{"app": "loader", "pod-template-hash": "7d9f8b6c5"},
		Containers: []node.ContainerSpec{{Name: "loader", Image: n.LoaderImage(t), Args: []string{name, "100", node.TracepointID(t, "syscalls", "sys_enter_getppid")}, Caps: []string{"BPF", "PERFMON", "SYS_ADMIN"}}},
	})
	want := n.PodNames(t, lp, "Deployment/loader")
	identity := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by k8s ns-a/Deployment/loader/loader"
	var d api.ProgDetail
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if d.ID == 0 {
			rows, _ := client.Progs(false)
			for _, r := range rows {
				if r.Name == name {
					d.ID = r.ID
				}
			}
		} else if got, err := client.Show(strconv.Itoa(int(d.ID))); err == nil {
			d = got
			if d.Pod != nil && d.Identity == identity && d.Loader != nil && d.Loader.Pod != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %s of pod %s in the chart pod's daemon: id %d, pod %+v, identity %q, loader %+v; want %+v and %q", name, want, d.ID, d.Pod, d.Identity, d.Loader, want, identity)
		}
	}
	t.Logf("program %d, loaded in pod %s: %s", d.ID, want, d.Identity)
	if *d.Pod != want || *d.Loader.Pod != want {
		t.Errorf("program %d: pod %+v, loader's pod %+v; the CRI says %+v", d.ID, *d.Pod, *d.Loader.Pod, want)
	}
	if d.Loader.PID != lp.Containers[0].PID {
		t.Errorf("program %d: loader pid %d, want the container's host pid %d", d.ID, d.Loader.PID, lp.Containers[0].PID)
	}
}

// podLacking runs the chart's pod with capability gone dropped from its
// list (through the chart's values, as a user would).
func podLacking(t *testing.T, n *node.Node, dir, gone string, args ...string) *chartPod {
	t.Helper()
	var caps []string
	for _, c := range wantCaps {
		if c != gone {
			caps = append(caps, c)
		}
	}
	args = append(args, "--set", "securityContext.capabilities.add={"+strings.Join(caps, ",")+"}")
	objs := renderFor(t, dir, args...)
	cont, _ := objs.Container()
	if got, _ := chart.Caps(cont); slices.Contains(got, gone) {
		t.Fatalf("rendered capabilities %v still hold %s", got, gone)
	}
	return runChart(t, n, "bpfperf-no-"+strings.ToLower(strings.ReplaceAll(gone, "_", "-")), objs)
}

// exited waits for the pod's daemon to exit and returns its exit code and
// log.
func (p *chartPod) exited(t *testing.T, n *node.Node, within time.Duration) (int32, string) {
	t.Helper()
	ctx := context.Background()
	id := p.pod.Containers[0].ID
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, err := n.Status(ctx, id); err == nil && st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st.GetExitCode(), n.Log(ctx, id)
		}
	}
	t.Fatalf("bpfperfd still runs after %v:\n%s", within, n.Log(ctx, id))
	return 0, ""
}

// TestCapabilitiesNeeded drops each of the chart's capabilities in turn
// and shows what fails without it: each is needed, or it would not be in
// the chart.
func TestCapabilitiesNeeded(t *testing.T) {
	n := nodeWithImage(t)
	privtest.LockStats(t)

	t.Run("SYS_ADMIN", func(t *testing.T) {
		// The daemon refuses to start: it cannot list the programs.
		p := podLacking(t, n, t.TempDir(), "SYS_ADMIN")
		code, log := p.exited(t, n, 30*time.Second)
		if code == 0 || !strings.Contains(log, "needs CAP_SYS_ADMIN") {
			t.Errorf("without SYS_ADMIN: exit %d, log:\n%s", code, log)
		}
		t.Logf("without SYS_ADMIN: exit %d: %s", code, strings.TrimSpace(log))
	})
	t.Run("SYSLOG", func(t *testing.T) {
		testSyslogNeeded(t, n)
	})
}

// TestUpgradeSecondPod: a second pod of the chart on the node while the
// first runs (an upgrade's new pod before the old one has gone) does not
// run beside it. Its bpfperfd waits for the host lock in the host's
// socket directory and says so; the first goes on counting and its store
// is untouched. Once the first stops (SIGTERM, as a kubelet stops it),
// the second takes the lock, opens the same store and answers on the same
// socket: the history goes on.
func TestUpgradeSecondPod(t *testing.T) {
	n := nodeWithImage(t)
	privtest.LockStats(t)
	dir := t.TempDir()
	objs := renderFor(t, dir)
	old := runChart(t, n, "bpfperf-old", objs)
	client := old.client(t, n)

	name := fmt.Sprintf("upgr_%d", os.Getpid()%100000)
	prog, err := privtest.LoadSocketFilter(name)
	id := privtest.Keep(t, prog, err)
	ids := strconv.Itoa(int(id))
	waitRuns(t, client, prog, ids, 5)
	firstSeen := time.Now()

	storeFile := filepath.Join(dir, "state", "bpfperf.db")
	before, err := os.Stat(storeFile)
	if err != nil {
		t.Fatal(err)
	}
	newer := runChart(t, n, "bpfperf-new", objs)
	newID := newer.pod.Containers[0].ID
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(n.Log(ctx, newID), "waiting for the host lock"); time.Sleep(100 * time.Millisecond) {
		if st, _ := n.Status(ctx, newID); st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED || time.Now().After(deadline) {
			t.Fatalf("the second pod's bpfperfd does not wait for the host lock (%v):\n%s", st.GetState(), n.Log(ctx, newID))
		}
	}
	for _, line := range strings.Split(n.Log(ctx, newID), "\n") {
		if strings.Contains(line, "waiting for the host lock") {
			t.Logf("the second pod's bpfperfd: %s", line)
		}
	}
	// The first still runs and writes its store; the second touches
	// neither the socket nor the store.
	waitRuns(t, client, prog, ids, 10)
	if s, err := client.Status(); err != nil || s.PID != old.pod.Containers[0].PID {
		t.Errorf("status %+v, %v: want the first pod's daemon (pid %d)", s.PID, err, old.pod.Containers[0].PID)
	}
	if after, err := os.Stat(storeFile); err != nil || !os.SameFile(before, after) {
		t.Errorf("store file replaced: %v", err)
	}

	// The old pod stops as a kubelet stops it (SIGTERM, a grace period)
	// and goes; the new one takes over the store where it was left.
	stopped := time.Now()
	if _, err := n.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: old.pod.Containers[0].ID, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st, err := n.Status(ctx, old.pod.Containers[0].ID); err != nil || st.GetExitCode() != 0 {
		t.Errorf("the first pod's bpfperfd stopped with exit %d (%v):\n%s", st.GetExitCode(), err, n.Log(ctx, old.pod.Containers[0].ID))
	}
	stopTook := time.Since(stopped)
	if err := n.RemovePod(ctx, old.pod.ID); err != nil {
		t.Fatal(err)
	}
	client = newer.client(t, n)
	s, err := client.Status()
	if err != nil || s.PID != newer.pod.Containers[0].PID {
		t.Fatalf("status %+v, %v: want the second pod's daemon (pid %d)", s.PID, err, newer.pod.Containers[0].PID)
	}
	t.Logf("the first pod's daemon stopped in %v; the second answered %v after the stop began", stopTook.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	waitRuns(t, client, prog, ids, 15)
	if chk, err := client.StoreCheck(); err != nil || !chk.OK {
		t.Errorf("store check after the upgrade: %+v, %v", chk, err)
	}
	h, err := client.History(ids, firstSeen.Add(-time.Minute), time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Points) == 0 || h.Points[0].Time.After(firstSeen) || h.Points[len(h.Points)-1].RunCnt != 15 {
		t.Errorf("history after the upgrade: %d points from %v to %v (first seen %v); want it from before the upgrade to 15 runs",
			len(h.Points), first(h.Points), last(h.Points), firstSeen)
	}
}

// waitRuns waits until the daemon knows prog, runs it up to total runs
// (the daemon's count is the true one when called: the last call waited
// for it), and waits until the daemon counts them.
func waitRuns(t *testing.T, c *api.Client, prog *ebpf.Program, id string, total uint64) {
	t.Helper()
	ran := false
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		d, err := c.Show(id)
		if err == nil && !ran {
			if err := privtest.Run(prog, int(total-d.RunCnt)); err != nil {
				t.Fatal(err)
			}
			ran = true
			continue
		}
		if err == nil && d.RunCnt == total {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %s: run count %d (%v), want %d", id, d.RunCnt, err, total)
		}
	}
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func first[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

func last[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

// testSyslogNeeded: without SYSLOG, CPU profiles cannot put samples in
// BPF programs. The kernel shows /proc/kallsyms addresses, and each
// program's JIT addresses (jited_ksyms), only to CAP_SYSLOG unless
// kernel.kptr_restrict is 0 and perf_event_paranoid at most 1. A busy
// program gets a sampled CPU share with the chart's set; without SYSLOG
// the profile windows go on (each ends and is stored) but find no BPF
// frame, so they keep no sample and the program gets no share, and
// status says why.
func testSyslogNeeded(t *testing.T, n *node.Node) {
	kptr, paranoid := sysctl(t, "kernel/kptr_restrict"), sysctl(t, "kernel/perf_event_paranoid")
	if kptr == 0 && paranoid <= 1 {
		t.Skipf("kptr_restrict %d, perf_event_paranoid %d: this host shows kernel addresses to every process, SYSLOG or not", kptr, paranoid)
	}
	prog, err := privtest.LoadLoop(fmt.Sprintf("busy_%d", os.Getpid()%100000), 20000)
	id := strconv.Itoa(int(privtest.Keep(t, prog, err)))
	// The program runs flat out on one CPU while the test lasts.
	privtest.KeepRunning(t, prog, 0, 50)
	profiles := []string{"--set", "daemon.extraArgs={--profile.every=1s}"}

	with := runChart(t, n, "bpfperf-syslog", renderFor(t, t.TempDir(), profiles...))
	c := with.client(t, n)
	var share *float64
	for deadline := time.Now().Add(20 * time.Second); share == nil || *share == 0; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("with SYSLOG: program %s never got a sampled CPU share", id)
		}
		if d, err := c.Show(id); err == nil {
			share = d.SampledCPUPercent
		}
	}
	t.Logf("with SYSLOG: program %s sampled at %.1f%% of a CPU", id, *share)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.RemovePod(ctx, with.pod.ID); err != nil {
		t.Fatal(err)
	}

	without := podLacking(t, n, t.TempDir(), "SYSLOG", profiles...)
	c = without.client(t, n)
	// Profiling shows in status once the profiler is set up, which may
	// end after the first tick (the kernel filter loads and reads
	// kallsyms first).
	var start api.Status
	for deadline := time.Now().Add(20 * time.Second); start.Profiling == nil; time.Sleep(100 * time.Millisecond) {
		if start, err = c.Status(); err == nil && start.Profiling != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status has no profiling in 20 s: %+v, %v", start, err)
		}
	}
	var s api.Status
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if s, err = c.Status(); err == nil && s.Profiling.Windows >= start.Profiling.Windows+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("without SYSLOG: not three profile windows in 20 s: %+v, %v", s.Profiling, err)
		}
	}
	if !strings.Contains(s.Profiling.LastError, "kernel addresses are hidden from bpfperfd") {
		t.Errorf("without SYSLOG, status's profiling error %q does not say why frames go unnamed", s.Profiling.LastError)
	}
	d, err := c.Show(id)
	if err != nil {
		t.Fatal(err)
	}
	if d.SampledCPUPercent != nil && *d.SampledCPUPercent > 0 {
		t.Errorf("without SYSLOG: program %s sampled at %.1f%%: SYSLOG is not needed here", id, *d.SampledCPUPercent)
	}
	if s.Profiling.LastProfileSamples != 0 {
		t.Errorf("without SYSLOG: the last window kept %d samples with BPF frames", s.Profiling.LastProfileSamples)
	}
	t.Logf("without SYSLOG: %d windows, none with a sample in a BPF program; status: %s", s.Profiling.Windows, s.Profiling.LastError)
}

func sysctl(t *testing.T, name string) int {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHostNetworkNeeded: a tc program attached on a host device through
// netlink (not a BPF link) has that device as its attach point in the
// chart's pod, which shares the host's network namespace, as bpftool
// net shows it; with hostNetwork off the daemon's netlink dump sees only
// the pod's interfaces and the program has no attach point.
func TestHostNetworkNeeded(t *testing.T) {
	n := nodeWithImage(t)
	privtest.LockStats(t)
	// The host's end of a veth pair is a device of the host's namespace.
	dev := privtest.VethsInNetns(t, 1)[0]
	privtest.AddClsact(t, dev)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: fmt.Sprintf("hnet_%d", os.Getpid()%100000), Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	id := privtest.Keep(t, prog, err)
	filter := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: dev.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: "hnet", DirectAction: true}
	if err := netlink.FilterAdd(filter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.FilterDel(filter) })
	// The oracle: bpftool net, in the host's namespace.
	out, err := exec.Command("bpftool", "net", "show", "dev", dev.Attrs().Name).Output()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("id %d", id)) {
		t.Fatalf("bpftool net show dev %s: %v\n%s", dev.Attrs().Name, err, out)
	}

	// attach waits until the daemon has scanned the program's holders (so
	// its attach points too) and returns them.
	attach := func(c *api.Client, want bool) []api.AttachPoint {
		var d api.ProgDetail
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			d, err = c.Show(strconv.Itoa(int(id)))
			if err == nil && len(d.Owners) > 0 && (!want || len(d.Attach) > 0) {
				return d.Attach
			}
			if time.Now().After(deadline) {
				t.Fatalf("program %d: %+v, %v", id, d, err)
			}
		}
	}
	on := runChart(t, n, "bpfperf-hostnet", renderFor(t, t.TempDir()))
	got := attach(on.client(t, n), true)
	if !slices.ContainsFunc(got, func(a api.AttachPoint) bool { return strings.Contains(a.Target, "("+dev.Attrs().Name+")") }) {
		t.Errorf("with hostNetwork: attach points %+v, want device %s", got, dev.Attrs().Name)
	}
	t.Logf("with hostNetwork: %+v", got)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.RemovePod(ctx, on.pod.ID); err != nil {
		t.Fatal(err)
	}

	off := runChart(t, n, "bpfperf-podnet", renderFor(t, t.TempDir(), "--set", "hostNetwork=false"))
	if got := attach(off.client(t, n), false); len(got) != 0 {
		t.Errorf("without hostNetwork: attach points %+v: hostNetwork is not needed for them", got)
	} else {
		t.Logf("without hostNetwork: no attach point for program %d", id)
	}
}
