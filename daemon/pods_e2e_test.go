package daemon_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// The pod tests run bpfperfd beside a real container node (internal/node):
// containerd's CRI and runc, pods made as a kubelet makes them, whose
// container loads a BPF program (internal/node/tploader). The oracle of
// every name is what the CRI itself answers about the pod and container.

// podLoaderCaps are what a loader's container gets, never privileged.
var podLoaderCaps = []string{"BPF", "PERFMON", "SYS_ADMIN"}

// TestPodLoaders (issue 43): a Deployment-style pod ns-a/loader-7d9f8b6c5-...
// whose container loads and holds a tracepoint program. progs, show,
// owners and /metrics name its namespace, pod, container and workload as
// the CRI lists them, and its identity's runner is the workload's
// container:
//
//   - the container restarted (new id), then the pod deleted and made
//     again (new uid and name): the same identity, no new_version;
//   - a rollout (new pod-template-hash) with a slower program (10 times the
//     loop turns): the same identity, exactly one new_version;
//   - a second pod of the workload at once: slot #2, no version of the
//     first;
//   - a pod of another workload that makes the program run: triggers
//     names it by its pod;
//   - the CRI socket stopped: status says so in one line, the daemon runs
//     on; it comes back when the socket does, and a container started
//     then is named again.
func TestPodLoaders(t *testing.T) {
	n, img, tp := loaderNode(t)
	cri := startCRIProxy(t)
	web := freeAddr(t)
	// --web.max-programs: a benchmark beside it may hold 10,000 programs,
	// which would sum this one into /metrics' id="other".
	d := startDaemon(t, t.TempDir(), "--profile.every", "2s", "--profile.hz", "999", "--cri.socket", cri.path, "--web.listen-address", web,
		"--web.max-programs", "100000")
	ctx := context.Background()

	name := uniqueName("podld")
	want := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by k8s ns-a/Deployment/loader/loader"
	spec := func(pod, hash string, turns int) node.PodSpec {
		return node.PodSpec{
			Namespace: "ns-a", Name: pod, Labels: map[string]string{"app": "loader", "pod-template-hash": hash},
			Containers: []node.ContainerSpec{{Name: "loader", Image: img, Args: []string{name, strconv.Itoa(turns), tp}, Caps: podLoaderCaps}},
		}
	}
	seen := map[uint32]bool{}
	next := func(what string, p *node.Pod) api.ProgDetail {
		t.Helper()
		id := newProg(t, d, name, seen)
		detail := settledIdentity(t, d, id)
		t.Logf("%s: program %d, %s", what, id, detail.Identity)
		checkPodNames(t, n, d, detail, p, web)
		return detail
	}

	p := n.RunPod(t, spec("loader-7d9f8b6c5-x2k4p", "7d9f8b6c5", 100))
	if got := next("first pod", p); got.Identity != want {
		t.Errorf("identity %q, want %q", got.Identity, want)
	}
	if err := n.RestartContainer(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	if got := next("container restarted", p); got.Identity != want {
		t.Errorf("after a container restart: identity %q, want %q", got.Identity, want)
	}
	if err := n.RemovePod(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	p = n.RunPod(t, spec("loader-7d9f8b6c5-q8zrt", "7d9f8b6c5", 100))
	if got := next("pod made again", p); got.Identity != want {
		t.Errorf("after the pod was made again: identity %q, want %q", got.Identity, want)
	}
	if nv := newVersionsOf(t, d, name); len(nv) != 0 {
		t.Errorf("new_version events %+v after a restart and a pod made again, want none", nv)
	}

	// A rollout of a slower program: a new pod-template-hash.
	if err := n.RemovePod(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	p = n.RunPod(t, spec("loader-5c8d9f7b6-m4n7v", "5c8d9f7b6", 1000))
	slow := next("rollout", p)
	if slow.Identity != want {
		t.Errorf("after a rollout: identity %q, want %q", slow.Identity, want)
	}
	var nv []api.Event
	eventually(t, "the rollout's new_version", func() bool { nv = newVersionsOf(t, d, name); return len(nv) > 0 })
	// Two of the workload's pods at once: the second is not a version.
	p2 := n.RunPod(t, spec("loader-5c8d9f7b6-w2x9z", "5c8d9f7b6", 1000))
	if got := next("second pod", p2); got.Identity != want+" #2" {
		t.Errorf("a second pod of the workload: identity %q, want %q", got.Identity, want+" #2")
	}
	if nv = newVersionsOf(t, d, name); len(nv) != 1 || nv[0].ID != slow.ID || nv[0].Identity != want {
		t.Errorf("new_version events %+v, want one, of program %d (%s)", nv, slow.ID, want)
	}

	// A pod of another workload makes the program run: triggers names it
	// by its pod, which only the profiler has seen (no loader, no holder).
	drv := n.RunPod(t, node.PodSpec{
		Namespace: "ns-c", Name: "driver-6f7d8c9b5-h4k2m", Labels: map[string]string{"app": "driver", "pod-template-hash": "6f7d8c9b5"},
		Containers: []node.ContainerSpec{{Name: "driver", Image: img, Args: []string{"drive", "2"}}},
	})
	driver := n.PodNames(t, drv, "Deployment/driver")
	cg, err := drv.Containers[0].Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	// The first answer with the driver's cgroup names it: the request
	// waits a moment for the CRI's answer.
	var row api.TriggerRow
	eventuallyWithin(t, 20*time.Second, "triggers to show the driver's cgroup", func() bool {
		var tr api.Triggers
		if d.query(&tr, "triggers", strconv.Itoa(int(slow.ID))) != nil {
			return false
		}
		i := slices.IndexFunc(tr.Rows, func(r api.TriggerRow) bool { return r.Cgroup == cg })
		if i >= 0 {
			row = tr.Rows[i]
		}
		return i >= 0
	})
	if row.Pod == nil || *row.Pod != driver || row.Workload != driver.String() {
		t.Errorf("the driver's trigger row: workload %q, pod %+v; want %+v", row.Workload, row.Pod, driver)
	}
	var byWorkload api.Triggers
	d.json(t, &byWorkload, "triggers", strconv.Itoa(int(slow.ID)), "--workload", "ns-c/Deployment/driver")
	if len(byWorkload.Rows) != 1 || byWorkload.Rows[0].Cgroup != cg {
		t.Errorf("triggers --workload ns-c/Deployment/driver: %+v, want the driver's row alone", byWorkload.Rows)
	}
	// Its CSV, of the one row, names the pod as the JSON does.
	if len(byWorkload.Rows) == 1 && byWorkload.Rows[0].Pod != nil {
		checkPodCSV(t, d.cli(t, "triggers", strconv.Itoa(int(slow.ID)), "--workload", "ns-c/Deployment/driver", "-o", "csv"),
			[]string{"prog_id", "prog_name", "workload", "context", "cgroup", "unit", "container", "devices", "samples", "cpu_ns", "cpu_percent", "share"},
			strconv.Itoa(int(slow.ID)), *byWorkload.Rows[0].Pod)
	}
	if out := d.cli(t, "triggers", strconv.Itoa(int(slow.ID))); !strings.Contains(out, driver.String()) {
		t.Errorf("triggers does not name the driver's pod %s:\n%s", driver.String(), out)
	} else {
		t.Logf("triggers:\n%s", out)
	}

	// The socket goes: status says so, the daemon runs on, names come
	// back with it.
	cri.stop()
	var st api.Status
	eventuallyWithin(t, 20*time.Second, "status to say the CRI socket is gone", func() bool {
		return d.query(&st, "status") == nil && strings.Contains(st.Pods, "no such socket")
	})
	t.Logf("socket stopped: pods: %s", st.Pods)
	if out := d.cli(t, "status"); !strings.Contains(out, "pods:") || strings.Count(st.Pods, "\n") > 0 {
		t.Errorf("status: want one pods line:\n%s", out)
	}
	if got := settledIdentity(t, d, slow.ID); got.Pod == nil || got.Pod.Pod != "loader-5c8d9f7b6-m4n7v" {
		t.Errorf("with the socket gone, a program named before lost its pod: %+v", got.Pod)
	}
	cri.start(t)
	eventuallyWithin(t, 20*time.Second, "status to say the CRI socket answers again", func() bool {
		return d.query(&st, "status") == nil && strings.HasPrefix(st.Pods, "CRI socket "+cri.path+": ") &&
			strings.Contains(st.Pods, "containers and sandboxes listed")
	})
	t.Logf("socket back: pods: %s", st.Pods)
	// A container started now is named again: the second pod's, restarted.
	if err := n.RestartContainer(ctx, p2, 0); err != nil {
		t.Fatal(err)
	}
	if got := next("second pod's container restarted after the socket came back", p2); got.Identity != want+" #2" {
		t.Errorf("identity %q, want %q", got.Identity, want+" #2")
	}
	select {
	case err := <-d.done:
		t.Fatalf("bpfperfd exited: %v\n%s", err, d.stderr)
	default:
	}
}

// TestPodIdentityFromContainerIDs (issue 43): an identity settled with the
// runner of a pod's container by ids (a daemon that does not read the CRI
// socket: one from before pod names, or --cri.socket none) is carried on
// by the next daemon, which names pods, once the container restarts with a
// changed program: its identity is the workload's, exactly one new_version
// against the old tag, and the identity's history holds the old
// instance's points too.
func TestPodIdentityFromContainerIDs(t *testing.T) {
	n, img, tp := loaderNode(t)
	ctx := context.Background()
	state := t.TempDir()
	d := startDaemon(t, state, "--profile.every", "0", "--cri.socket", "none")
	name := uniqueName("podid")
	p := n.RunPod(t, node.PodSpec{
		Namespace: "ns-b", Name: "agent-7d9f8b6c5-z2k4q", Labels: map[string]string{"app": "agent", "pod-template-hash": "7d9f8b6c5"},
		Containers: []node.ContainerSpec{{Name: "agent", Image: img, Args: []string{name, "100", tp}, Caps: podLoaderCaps}},
	})
	seen := map[uint32]bool{}
	v1 := settledIdentity(t, d, newProg(t, d, name, seen))
	byIDs := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by container pod " + p.UID + "/" + p.Containers[0].ID[:12]
	if v1.Identity != byIDs || v1.Pod != nil {
		t.Fatalf("without the CRI socket: identity %q, pod %+v; want %q and none", v1.Identity, v1.Pod, byIDs)
	}
	time.Sleep(time.Second) // points of the old identity
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.stderr)
	}

	d = startDaemon(t, state, "--profile.every", "0", "--cri.socket", node.Socket)
	// The container restarts with a changed program, as a pod whose image
	// was changed in place.
	p.Spec.Containers[0].Args = []string{name, "300", tp}
	if err := n.RestartContainer(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	v2 := settledIdentity(t, d, newProg(t, d, name, seen))
	want := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by k8s ns-b/Deployment/agent/agent"
	if v2.Identity != want || v2.Tag == v1.Tag {
		t.Errorf("after the restart: identity %q, tag %s (was %s); want %q and another tag", v2.Identity, v2.Tag, v1.Tag, want)
	}
	var nv []api.Event
	eventually(t, "a new_version", func() bool { nv = newVersionsOf(t, d, name); return len(nv) > 0 })
	if len(nv) != 1 || nv[0].ID != v2.ID || nv[0].Detail != "previous tag "+v1.Tag {
		t.Errorf("new_version events %+v, want one, of program %d against tag %s", nv, v2.ID, v1.Tag)
	}
	var pts []api.HistoryPoint
	d.json(t, &pts, "history", v2.IdentityID, "--since", "5m")
	ids := map[uint32]bool{}
	for _, pt := range pts {
		ids[pt.ID] = true
	}
	if !ids[v1.ID] || !ids[v2.ID] {
		t.Errorf("history of %s has points of programs %v; want the old instance %d and the new %d", v2.IdentityID, ids, v1.ID, v2.ID)
	}
}

// newProg waits for a loaded program named name not in seen, and adds it.
func newProg(t *testing.T, d *daemonProc, name string, seen map[uint32]bool) uint32 {
	t.Helper()
	var id uint32
	eventuallyWithin(t, 30*time.Second, "a new program "+name, func() bool {
		var rows []api.ProgRow
		if d.query(&rows, "progs") != nil {
			return false
		}
		for _, r := range rows {
			if r.Name == name && !seen[r.ID] {
				id = r.ID
				return true
			}
		}
		return false
	})
	seen[id] = true
	return id
}

// checkPodNames checks that show, progs, owners and /metrics (on web)
// name the pod and container of p as the CRI answers for them.
func checkPodNames(t *testing.T, n *node.Node, d *daemonProc, detail api.ProgDetail, p *node.Pod, web string) {
	t.Helper()
	want := n.PodNames(t, p, "Deployment/loader")
	if detail.Pod == nil || *detail.Pod != want {
		t.Errorf("program %d: pod %+v, want %+v (the CRI's)", detail.ID, detail.Pod, want)
	}
	if lo := detail.Meta.Loader; lo == nil || lo.Pod == nil || *lo.Pod != want || lo.PID != p.Containers[0].PID {
		t.Errorf("program %d: loader %+v, want pid %d in %+v", detail.ID, lo, p.Containers[0].PID, want)
	}
	id := strconv.Itoa(int(detail.ID))
	if out := d.cli(t, "show", id); !strings.Contains(out, "pod "+want.String()) ||
		!strings.Contains(out, want.String()+", workload Deployment/loader, pod uid "+want.UID) {
		t.Errorf("show does not name the pod %s:\n%s", want.String(), out)
	}
	if out := d.cli(t, "progs"); !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(l, id+" ") && strings.Contains(l, want.String())
	}) {
		t.Errorf("progs does not name the pod %s on program %s:\n%s", want.String(), id, out)
	}
	owner := "tploader[" + strconv.Itoa(p.Containers[0].PID) + "]"
	eventually(t, "owners to name the pod of "+owner, func() bool {
		var o api.Owners
		if d.query(&o, "owners") != nil {
			return false
		}
		i := slices.IndexFunc(o.Owners, func(r api.OwnerRow) bool { return r.Owner == owner })
		return i >= 0 && o.Owners[i].Pod != nil && *o.Owners[i].Pod == want
	})
	if out := d.cli(t, "owners"); !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(l, owner+" ") && strings.Contains(l, want.String())
	}) {
		t.Errorf("owners does not name the pod %s of %s:\n%s", want.String(), owner, out)
	}
	// CSV: the pod's columns after the ones there were before, as the
	// JSON of the same query names the pod.
	var progRows []api.ProgRow
	d.json(t, &progRows, "progs")
	if i := slices.IndexFunc(progRows, func(r api.ProgRow) bool { return r.ID == detail.ID }); i < 0 || progRows[i].Pod == nil || *progRows[i].Pod != want {
		t.Errorf("progs -o json: program %d's pod is not %+v", detail.ID, want)
	}
	checkPodCSV(t, d.cli(t, "progs", "-o", "csv"), []string{"id", "type", "name", "where", "tag", "runs_per_sec", "avg_ns_per_run", "cpu_percent",
		"sampled_cpu_percent", "run_cnt", "run_time_ns", "recursion_misses", "loaded", "identity_id"}, id, want)
	var ownerRows api.Owners
	d.json(t, &ownerRows, "owners")
	if i := slices.IndexFunc(ownerRows.Owners, func(r api.OwnerRow) bool { return r.Owner == owner }); i < 0 || ownerRows.Owners[i].Pod == nil || *ownerRows.Owners[i].Pod != want {
		t.Errorf("owners -o json: %s's pod is not %+v", owner, want)
	}
	checkPodCSV(t, d.cli(t, "owners", "-o", "csv"), []string{"owner", "kind", "pid", "comm", "unit", "container", "cgroup", "programs", "runs_per_sec",
		"cpu_percent", "sampled_cpu_percent", "run_cnt", "run_time_ns", "maps", "map_bytes", "present"}, owner, want)

	var only api.Owners
	d.json(t, &only, "owners", "--owner", want.Namespace+"/"+want.Pod)
	if len(only.Owners) != 1 || only.Owners[0].Owner != owner {
		t.Errorf("owners --owner %s/%s: %+v, want %s alone", want.Namespace, want.Pod, only.Owners, owner)
	}
	_, _, body := get(t, "http://"+web+"/metrics")
	labels := []string{`id="` + id + `"`, `namespace="` + want.Namespace + `"`, `pod="` + want.Pod + `"`,
		`container="` + want.Container + `"`, `workload="Deployment/loader"`}
	if !slices.ContainsFunc(strings.Split(string(body), "\n"), func(l string) bool {
		return strings.HasPrefix(l, "bpfperf_program_info{") && !slices.ContainsFunc(labels, func(s string) bool { return !strings.Contains(l, s) })
	}) {
		t.Errorf("/metrics has no bpfperf_program_info with %v", labels)
	}
}

// checkPodCSV checks a listing's CSV: its columns begin with before, the
// ones it had before pods had names, and end with the pod's; the row
// whose first cell is key names want there.
func checkPodCSV(t *testing.T, out string, before []string, key string, want api.Pod) {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("CSV: %v\n%s", err, out)
	}
	podCols := []string{"k8s_namespace", "k8s_pod", "k8s_pod_uid", "k8s_container", "k8s_container_id", "k8s_workload"}
	if header := rows[0]; !slices.Equal(header, append(slices.Clone(before), podCols...)) {
		t.Errorf("CSV header %v, want %v then %v", header, before, podCols)
		return
	}
	i := slices.IndexFunc(rows[1:], func(r []string) bool { return r[0] == key })
	if i < 0 {
		t.Errorf("CSV has no row of %s:\n%s", key, out)
		return
	}
	got := rows[1+i][len(before):]
	if w := []string{want.Namespace, want.Pod, want.UID, want.Container, want.ContainerID, want.Workload}; !slices.Equal(got, w) {
		t.Errorf("CSV row of %s: pod columns %q, want %q", key, got, w)
	}
}

// newVersionsOf are the new_version events of programs named name (not
// --prog name: two of them loaded at once make the name ambiguous).
func newVersionsOf(t *testing.T, d *daemonProc, name string) []api.Event {
	t.Helper()
	return slices.DeleteFunc(eventsOf(t, d, "new_version"), func(e api.Event) bool { return e.Name != name })
}

// loaderNode is the test node, with an image of tploader and the id of
// the tracepoint its programs attach to.
func loaderNode(t *testing.T) (n *node.Node, img, tp string) {
	t.Helper()
	privtest.Root(t)
	privtest.Tracefs(t)
	n = node.Start(t)
	return n, n.LoaderImage(t), node.TracepointID(t, "syscalls", "sys_enter_getppid")
}

// criProxy is the CRI socket as the daemon sees it: a socket of the test's
// that forwards to the node's, so that the test can take it away and give
// it back while other tests use the node.
type criProxy struct {
	path  string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func startCRIProxy(t *testing.T) *criProxy {
	t.Helper()
	p := &criProxy{path: filepath.Join(t.TempDir(), "cri.sock")}
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

// start listens on the path and forwards each connection to the node.
func (p *criProxy) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", node.Socket)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener, which removes the socket file, and every
// connection: as a runtime that stopped.
func (p *criProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestPodEth0Identity (issue 43): a tcx program on a pod's own eth0 is
// named by the pod's name in WHERE and by its workload in its identity.
// The pod deleted and made again by its Deployment (a new name and uid,
// the program loaded and attached again): the same identity, its history
// holding both instances' points, no new_version. The same program on the
// eth0 of a pod of another Deployment: another identity. The oracle of the
// names is the CRI's status of each pod.
func TestPodEth0Identity(t *testing.T) {
	privtest.Root(t)
	n := node.Start(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0", "--cri.socket", node.Socket)
	ctx := context.Background()
	name := uniqueName("podeth")
	pod := func(podName, app, hash string) *node.Pod {
		return n.RunPod(t, node.PodSpec{
			Namespace: "ns-a", Name: podName, Labels: map[string]string{"app": app, "pod-template-hash": hash},
			Containers: []node.ContainerSpec{{Name: app}},
		})
	}
	// onEth0 loads the program and attaches it with a tcx link to p's
	// eth0, and returns its row once its identity is settled, and what
	// detaches and closes it.
	onEth0 := func(p *node.Pod) (api.ProgRow, func()) {
		t.Helper()
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: name, Type: ebpf.SchedCLS, AttachType: ebpf.AttachTCXIngress, License: "MIT",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}, // TCX_NEXT
		})
		id := privtest.Keep(t, prog, err)
		var l link.Link
		err = privtest.InNetns(fmt.Sprintf("/proc/%d/ns/net", p.Containers[0].PID), func() error {
			dev, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			l, err = link.AttachTCX(link.TCXOptions{Program: prog, Interface: dev.Index, Attach: ebpf.AttachTCXIngress})
			return err
		})
		if err != nil {
			t.Fatalf("tcx on the eth0 of pod %s: %v", p.Spec.Name, err)
		}
		row := settledRows(t, d, id)[id]
		t.Logf("pod %s: program %d where %q, identity %s (%s)", p.Spec.Name, id, row.Where, row.IdentityID, row.Identity)
		return row, func() { l.Close(); prog.Close() }
	}
	// podName is the pod's name as the CRI answers for it.
	podName := func(p *node.Pod) string {
		ps, err := n.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		md := ps.GetStatus().GetMetadata()
		return md.GetNamespace() + "/" + md.GetName()
	}
	check := func(r api.ProgRow, p *node.Pod, workload string) {
		t.Helper()
		if want := "tcx pod " + podName(p) + " eth0 ingress"; r.Where != want {
			t.Errorf("program %d: where %q, want %q", r.ID, r.Where, want)
		}
		if want := " at tcx pod ns-a/" + workload + " eth0 ingress by "; !strings.Contains(r.Identity, want) {
			t.Errorf("program %d: identity %q, want it %q", r.ID, r.Identity, want)
		}
	}

	p1 := pod("web-7d9f8b6c5-x2k4p", "web", "7d9f8b6c5")
	v1, detach := onEth0(p1)
	check(v1, p1, "Deployment/web")
	time.Sleep(time.Second) // points of the first instance
	detach()
	if err := n.RemovePod(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}

	p2 := pod("web-7d9f8b6c5-q8zrt", "web", "7d9f8b6c5")
	if p2.UID == p1.UID {
		t.Fatalf("the pod made again has the old uid %s", p1.UID)
	}
	v2, detach := onEth0(p2)
	defer detach()
	check(v2, p2, "Deployment/web")
	if v2.Identity != v1.Identity || v2.IdentityID != v1.IdentityID {
		t.Errorf("the pod made again: identity %s (%s), want the first pod's %s (%s)", v2.IdentityID, v2.Identity, v1.IdentityID, v1.Identity)
	}
	var pts []api.HistoryPoint
	eventually(t, "history points of both instances", func() bool {
		d.json(t, &pts, "history", v2.IdentityID, "--since", "5m")
		return slices.ContainsFunc(pts, func(pt api.HistoryPoint) bool { return pt.ID == v1.ID }) &&
			slices.ContainsFunc(pts, func(pt api.HistoryPoint) bool { return pt.ID == v2.ID })
	})

	p3 := pod("api-5c8d9f7b6-m4n7v", "api", "5c8d9f7b6")
	v3, detach3 := onEth0(p3)
	defer detach3()
	check(v3, p3, "Deployment/api")
	if v3.IdentityID == v2.IdentityID {
		t.Errorf("a pod of another workload: identity %s (%s), the same as web's", v3.IdentityID, v3.Identity)
	}
	if nv := newVersionsOf(t, d, name); len(nv) != 0 {
		t.Errorf("new_version events %+v, want none", nv)
	}
}
