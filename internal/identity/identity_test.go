package identity

import (
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/collectors"
)

func TestKeyParsesBack(t *testing.T) {
	for _, id := range []Identity{
		{Type: "tracepoint", Name: "tracepoint__syscalls__sys_enter_execve", Attach: "perf_event tracepoint sys_enter_execve", Runner: "execsnoop"},
		{Type: "tracepoint", Name: "sys_enter_opena", Attach: "perf_event tracepoint sys_enter_openat", Runner: "bpftrace", Slot: 2},
		{Type: "sched_cls", Name: "tc_count", Attach: "tc dev bv1 ingress, tc dev bv2 ingress"},
		{Type: "xdp", Name: "x", Runner: "unit cilium.service"},
		{Type: "socket_filter", Name: "f", Slot: 3},
		{Type: "socket_filter", Name: "f"},
	} {
		got, ok := Parse(id.Key())
		if !ok || got != id {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", id.Key(), got, ok, id)
		}
	}
	if id := ShortID(""); id != "" {
		t.Errorf("ShortID of no key = %q, want none", id)
	}
	for _, bad := range []string{"", "noslash", "/x", "t/", "t/n junk", "t/n #1", "t/n #x"} {
		if got, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) = %+v, want not ok", bad, got)
		}
	}
}

// TestAttachNetns: a device in the daemon's network namespace reads as
// identities stored before namespaces were told apart read ("tcx dev
// bv1 ingress"), so they still match; one in another namespace is named
// by the namespace and its name there, never by its ifindex, which is
// another device's here.
func TestAttachNetns(t *testing.T) {
	for _, c := range []struct {
		ap   collectors.AttachPoint
		want string
	}{
		{collectors.AttachPoint{Type: "tcx", Target: "ifindex 2 (ifb0) ingress"}, "tcx dev ifb0 ingress"},
		{collectors.AttachPoint{Type: "tc", Target: "ifindex 6 (bv1) egress"}, "tc dev bv1 egress"},
		{collectors.AttachPoint{Type: "xdp", Target: "ifindex 6 (bv1)"}, "xdp dev bv1"},
		{collectors.AttachPoint{Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "pod ns-a/loader-7d9f8b6c5-x2k4p"}, "tcx pod ns-a/loader-7d9f8b6c5-x2k4p eth0 ingress"},
		{collectors.AttachPoint{Type: "xdp", Target: "ifindex 2 (eth0)", Netns: "netns blue"}, "xdp netns blue eth0"},
		{collectors.AttachPoint{Type: "tc", Target: "ifindex 3 (veth1) egress", Netns: "netns 4026532871"}, "tc netns 4026532871 veth1 egress"},
		{collectors.AttachPoint{Type: "tcx", Target: "ifindex 2 ingress", Netns: "netns unknown"}, "tcx netns unknown ifindex 2 ingress"},
	} {
		if got := Attach([]collectors.AttachPoint{c.ap}); got != c.want {
			t.Errorf("Attach(%+v) = %q, want %q", c.ap, got, c.want)
		}
	}
	// The same device name in two namespaces is two attach points.
	two := Attach([]collectors.AttachPoint{
		{Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "netns a"},
		{Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "netns b"},
		{Type: "tcx", Target: "ifindex 4 (eth0) ingress"},
	})
	if want := "tcx dev eth0 ingress, tcx netns a eth0 ingress, tcx netns b eth0 ingress"; two != want {
		t.Errorf("Attach of eth0 in three namespaces = %q, want %q", two, want)
	}
	// A pod's device: by the pod's name for people, by its workload in
	// the identity (two pods of one Deployment, one after the other).
	for _, pod := range []string{"web-7d9f8b6c5-x2k4p", "web-7d9f8b6c5-q8zrt"} {
		ap := []collectors.AttachPoint{{Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "pod ns-a/" + pod, NetnsKey: "pod ns-a/Deployment/web"}}
		if got, want := Attach(ap), "tcx pod ns-a/Deployment/web eth0 ingress"; got != want {
			t.Errorf("Attach(%+v) = %q, want %q", ap, got, want)
		}
		if got, want := Where(ap), "tcx pod ns-a/"+pod+" eth0 ingress"; got != want {
			t.Errorf("Where(%+v) = %q, want %q", ap, got, want)
		}
	}
	id := Identity{Type: "sched_cls", Name: "ingress", Attach: "tcx pod ns-a/web-0 eth0 ingress", Runner: "container pod 0f1e/ab12"}
	if got, ok := Parse(id.Key()); !ok || got != id {
		t.Errorf("Parse(%q) = %+v, %v", id.Key(), got, ok)
	}
}

func TestOf(t *testing.T) {
	m := collectors.Meta{Type: "sched_cls", Name: "tc_count",
		Attach: []collectors.AttachPoint{{Type: "tcx", Target: "ifindex 9 (bv2) ingress"}, {Type: "tcx", Target: "ifindex 7 (bv1) ingress"}},
		Owners: []collectors.Owner{{PID: 77, Comm: "bpfperfd"}, {PID: 300, Comm: "child"}, {PID: 200, Comm: "loader"}},
	}
	got := Of(m, 77)
	want := Identity{Type: "sched_cls", Name: "tc_count", Attach: "tcx dev bv1 ingress, tcx dev bv2 ingress", Runner: "loader"}
	if got != want {
		t.Fatalf("Of = %+v, want %+v", got, want)
	}
	// A service or a container names the runner before a command; the
	// daemon's own pid never does.
	m.Owners = append(m.Owners, collectors.Owner{PID: 400, Comm: "agent", Unit: "agent.service"})
	if r := Of(m, 77).Runner; r != "unit agent.service" {
		t.Errorf("runner %q, want the service", r)
	}
	if r := Runner([]collectors.Owner{{PID: 77, Comm: "bpfperfd"}}, 77); r != "" {
		t.Errorf("runner %q, want none: the daemon's brief fds make it no runner", r)
	}
	if r := Runner([]collectors.Owner{{Pin: "/sys/fs/bpf/p"}}, 77); r != "pin /sys/fs/bpf/p" {
		t.Errorf("runner %q, want the pin", r)
	}
}

func TestSlots(t *testing.T) {
	var s Slots
	a := Identity{Type: "tracepoint", Name: "n", Runner: "execsnoop"}
	first, second, third := s.Take(a), s.Take(a), s.Take(a)
	if first.Slot != 0 || second.Slot != 2 || third.Slot != 3 {
		t.Fatalf("slots %d %d %d, want 0 2 3", first.Slot, second.Slot, third.Slot)
	}
	if other := s.Take(Identity{Type: "tracepoint", Name: "m"}); other.Slot != 0 {
		t.Errorf("another identity took slot %d", other.Slot)
	}
	s.Free(second)
	if again := s.Take(a); again.Slot != 2 {
		t.Errorf("after freeing slot 2, took %d", again.Slot)
	}
	s.Free(first)
	if again := s.Take(a); again.Slot != 0 {
		t.Errorf("after freeing slot 0, took %d", again.Slot)
	}
}

func TestContinues(t *testing.T) {
	cur := Identity{Type: "tracepoint", Name: "tracepoint__syscalls__sys_enter_execve", Attach: "perf_event tracepoint sys_enter_execve", Runner: "execsnoop"}
	for _, c := range []struct {
		old  Identity
		want bool
	}{
		{Identity{Type: "tracepoint", Name: "tracepoint__sys", Attach: cur.Attach, Runner: "execsnoop"}, true},
		{Identity{Type: "tracepoint", Name: "tracepoint__sys"}, false},                     // attach and owners not read then: it would continue any syscall program
		{Identity{Type: "tracepoint", Name: "tracepoint__sys", Attach: cur.Attach}, false}, // the runner not known
		{Identity{Type: "tracepoint", Name: "tracepoint__sys", Attach: "perf_event tracepoint sys_exit_execve"}, false},
		{Identity{Type: "tracepoint", Name: "tracepoint__sy"}, false}, // 14 characters: not cut
		{Identity{Type: "kprobe", Name: "tracepoint__sys"}, false},
		{Identity{Type: "tracepoint", Name: "tracepoint__sys", Runner: "opensnoop"}, false},
	} {
		if got := Continues(c.old, cur); got != c.want {
			t.Errorf("Continues(%+v) = %v, want %v", c.old, got, c.want)
		}
	}
}

// TestRunnerOf: the loader's unit, container, the pin and its command, in
// that order; without a loader (or where the daemon loaded it) the pin,
// then the holders; a passer-by holder never outranks the loader or pin.
func TestRunnerOf(t *testing.T) {
	passerBy := collectors.Owner{PID: 50, Comm: "bpftool", Unit: "cron.service"}
	loader := func(comm, cgroup string) *collectors.Loader {
		l := &collectors.Loader{PID: 100, Comm: comm, Cgroup: cgroup}
		l.Unit, l.Container = collectors.UnitAndContainer(cgroup)
		return l
	}
	const self = 7
	for _, tc := range []struct {
		what string
		m    collectors.Meta
		want string
	}{
		{"loader in a service", collectors.Meta{Loader: loader("agent", "/system.slice/agent.service"), Pin: "/sys/fs/bpf/a", Owners: []collectors.Owner{passerBy}}, "unit agent.service"},
		{"loader in a container", collectors.Meta{Loader: loader("tetragon", "/kubepods/besteffort/pod0a1b2c3d-0000-1111-2222-333344445555/"+strings.Repeat("ab", 32)), Owners: []collectors.Owner{passerBy}},
			"container pod 0a1b2c3d-0000-1111-2222-333344445555/abababababab"},
		{"loader exited, pinned", collectors.Meta{Loader: loader("bpftool", "/user.slice/session-1.scope"), Pin: "/sys/fs/bpf/reg", Owners: []collectors.Owner{passerBy}}, "pin /sys/fs/bpf/reg"},
		{"loader's command", collectors.Meta{Loader: loader("execsnoop", "/user.slice/session-1.scope"), Owners: []collectors.Owner{passerBy}}, "execsnoop"},
		{"no loader, pinned", collectors.Meta{Pin: "/sys/fs/bpf/reg", Owners: []collectors.Owner{passerBy}}, "pin /sys/fs/bpf/reg"},
		{"no loader, held only by its pin", collectors.Meta{Owners: []collectors.Owner{{Pin: "/sys/fs/bpf/p"}}}, "pin /sys/fs/bpf/p"},
		{"no loader, holders", collectors.Meta{Owners: []collectors.Owner{{PID: 30, Comm: "execsnoop"}, {PID: 31, Comm: "sh"}}}, "execsnoop"},
		{"loaded by the daemon", collectors.Meta{Loader: &collectors.Loader{PID: self, Comm: "bpfperfd"}, Owners: []collectors.Owner{{PID: 30, Comm: "x"}}}, "x"},
	} {
		if got := RunnerOf(tc.m, self); got != tc.want {
			t.Errorf("%s: runner %q, want %q", tc.what, got, tc.want)
		}
	}
}

// TestTakePreferring: a copy takes back the slot its code had, free or
// not yet reached, wherever it comes in the load order; without a
// preference, the lowest free one.
func TestTakePreferring(t *testing.T) {
	base := Identity{Type: "socket_filter", Name: "f", Runner: "tool"}
	last := map[string]string{base.Key(): "aaaa", Identity{Type: "socket_filter", Name: "f", Runner: "tool", Slot: 3}.Key(): "bbbb"}
	preferTag := func(tag string) func(Identity) bool {
		return func(c Identity) bool { return last[c.Key()] == tag }
	}
	var s Slots
	b := s.TakePreferring(base, preferTag("bbbb")) // b's code, loaded first this time
	a := s.TakePreferring(base, preferTag("aaaa"))
	c := s.TakePreferring(base, preferTag("cccc")) // new code: the lowest free
	if b.Slot != 3 || a.Slot != 0 || c.Slot != 2 {
		t.Errorf("slots %d, %d, %d; want 3 (b's), 0 (a's), then the lowest free, 2", b.Slot, a.Slot, c.Slot)
	}
	s.Free(b)
	if again := s.Take(base); again.Slot != 3 {
		t.Errorf("after freeing 3, took %d", again.Slot)
	}
}

// TestPodRunner (issue 43): a loader in a pod the CRI named runs its
// programs as its workload's container, which a container restart (new
// id), a pod made again (new uid and name) and a rollout (new hash) keep;
// without the pod's names the runner is the container by ids, as before.
func TestPodRunner(t *testing.T) {
	pod := func(uid, name, id string) *collectors.Pod {
		return &collectors.Pod{Namespace: "ns-a", Pod: name, UID: uid, Container: "loader", ContainerID: id, Workload: "Deployment/loader"}
	}
	m := collectors.Meta{Type: "tracepoint", Name: "t", Attach: []collectors.AttachPoint{{Type: "perf_event", Target: "tracepoint sys_enter_getppid"}}}
	want := "k8s ns-a/Deployment/loader/loader"
	var first string
	for i, lo := range []collectors.Loader{
		{PID: 10, Container: "pod u1/aaaaaaaaaaaa", Pod: pod("u1", "loader-7d9f8b6c5-x2k4p", "aaaa")},
		{PID: 11, Container: "pod u1/bbbbbbbbbbbb", Pod: pod("u1", "loader-7d9f8b6c5-x2k4p", "bbbb")}, // restarted
		{PID: 12, Container: "pod u2/cccccccccccc", Pod: pod("u2", "loader-7d9f8b6c5-q8zrt", "cccc")}, // made again
		{PID: 13, Container: "pod u3/dddddddddddd", Pod: pod("u3", "loader-5c8d9f7b6-m4n7v", "dddd")}, // rolled out
	} {
		m.Loader = &lo
		id := Of(m, 1)
		if id.Runner != want {
			t.Errorf("loader %d: runner %q, want %q", i, id.Runner, want)
		}
		if i == 0 {
			first = id.Key()
		} else if id.Key() != first {
			t.Errorf("loader %d: key %q, want the first's %q", i, id.Key(), first)
		}
		if got, ok := Parse(id.Key()); !ok || got != id {
			t.Errorf("Parse(%q) = %+v, %v", id.Key(), got, ok)
		}
	}
	// A holder in a pod names it where no loader is known.
	m.Loader = nil
	m.Owners = []collectors.Owner{{PID: 5, Comm: "agent", Container: "pod u1/aaaaaaaaaaaa", Pod: pod("u1", "loader-7d9f8b6c5-x2k4p", "aaaa")}}
	if r := Of(m, 1).Runner; r != want {
		t.Errorf("a holder in a pod: runner %q, want %q", r, want)
	}
	// Without the pod's names (no CRI socket): the container by ids.
	m.Owners = nil
	m.Loader = &collectors.Loader{PID: 10, Container: "pod u1/aaaaaaaaaaaa"}
	if r := Of(m, 1).Runner; r != "container pod u1/aaaaaaaaaaaa" {
		t.Errorf("no pod names: runner %q, want the container by ids", r)
	}
}

// TestContinuesPod: an identity whose runner named a pod's container by
// ids (settled before pods had names, or while the socket was down) is
// carried on by the same program in that pod named by its workload, and
// by nothing else.
func TestContinuesPod(t *testing.T) {
	old := Identity{Type: "tracepoint", Name: "t", Attach: "perf_event tracepoint sys_enter_getppid", Runner: "container pod u1/aaaaaaaaaaaa"}
	cur := old
	cur.Runner = "k8s ns-a/Deployment/loader/loader"
	if uid, ok := PodUIDOf(old.Runner); !ok || uid != "u1" {
		t.Errorf("PodUIDOf(%q) = %q, %v", old.Runner, uid, ok)
	}
	for _, r := range []string{"k8s ns-a/Deployment/loader/loader", "unit a.service", "container 0123456789ab", "execsnoop", "container pod "} {
		if uid, ok := PodUIDOf(r); ok {
			t.Errorf("PodUIDOf(%q) = %q: not a pod's container by ids", r, uid)
		}
	}
	if !ContinuesPod(old, cur, "u1") {
		t.Errorf("%q does not carry on %q in its own pod", cur.Key(), old.Key())
	}
	other := func(f func(*Identity)) Identity { c := cur; f(&c); return c }
	for what, c := range map[string]Identity{
		"another name":   other(func(c *Identity) { c.Name = "u" }),
		"another attach": other(func(c *Identity) { c.Attach = "" }),
		"another slot":   other(func(c *Identity) { c.Slot = 2 }),
		"not a pod's":    other(func(c *Identity) { c.Runner = "execsnoop" }),
	} {
		if ContinuesPod(old, c, "u1") {
			t.Errorf("%s: %q carries on %q", what, c.Key(), old.Key())
		}
	}
	if ContinuesPod(old, cur, "u2") {
		t.Error("a program of another pod (a pod made again: a new uid) carries on the old pod's identity")
	}
}
