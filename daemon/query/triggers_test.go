package query

import (
	"reflect"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/profile"
)

// TestResolveUnknown: samples whose chain stopped at a syscall tracepoint
// program are its caller's (task context, their cgroup) and join that
// row; at an XDP program they are no cgroup's.
func TestResolveUnknown(t *testing.T) {
	costs := []profile.TriggerCost{
		{Trigger: profile.Trigger{Context: "task", Cgroup: "/a.service"}, Samples: 2, Nanos: 20},
		{Trigger: profile.Trigger{Context: "unknown", Cgroup: "/b.service"}, Samples: 3, Nanos: 30},
		{Trigger: profile.Trigger{Context: "unknown", Cgroup: "/a.service"}, Samples: 2, Nanos: 20},
		{Trigger: profile.Trigger{Context: "softirq/net_rx"}, Samples: 1, Nanos: 10},
	}
	syscalls := []collectors.AttachPoint{{Type: "perf_event", Target: "tracepoint sys_enter_execve"}, {Type: "raw_tracepoint", Target: "sys_exit"}}
	if !taskOnly(syscalls) || taskOnly(nil) || taskOnly([]collectors.AttachPoint{{Type: "xdp", Target: "ifindex 2 (eth0)"}}) ||
		taskOnly(append(syscalls, collectors.AttachPoint{Type: "perf_event", Target: "tracepoint sched_switch"})) {
		t.Error("taskOnly: want syscall tracepoints only, and at least one")
	}
	got := resolveUnknown(costs, infoOf(&collectors.Meta{Attach: syscalls}))
	want := []profile.TriggerCost{
		{Trigger: profile.Trigger{Context: "task", Cgroup: "/a.service"}, Samples: 4, Nanos: 40},
		{Trigger: profile.Trigger{Context: "task", Cgroup: "/b.service"}, Samples: 3, Nanos: 30},
		{Trigger: profile.Trigger{Context: "softirq/net_rx"}, Samples: 1, Nanos: 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("syscall tracepoint:\n got %+v\nwant %+v", got, want)
	}
	got = resolveUnknown(costs, infoOf(&collectors.Meta{Attach: []collectors.AttachPoint{{Type: "xdp", Target: "ifindex 2 (eth0)"}}}))
	want = []profile.TriggerCost{
		{Trigger: profile.Trigger{Context: "unknown"}, Samples: 5, Nanos: 50},
		{Trigger: profile.Trigger{Context: "task", Cgroup: "/a.service"}, Samples: 2, Nanos: 20},
		{Trigger: profile.Trigger{Context: "softirq/net_rx"}, Samples: 1, Nanos: 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("xdp:\n got %+v\nwant %+v", got, want)
	}
}

// TestTriggerDevices: a network softirq's row names the program's devices
// as before in the daemon's network namespace, and by namespace and name
// in another, where its ifindex is another device's out here.
func TestTriggerDevices(t *testing.T) {
	info := infoOf(&collectors.Meta{Attach: []collectors.AttachPoint{
		{Type: "xdp", Target: "ifindex 4 (eth0)"},
		{Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "pod ns-a/loader-7d9f8b6c5-x2k4p"},
		{Type: "perf_event", Target: "tracepoint sched_switch"},
	}})
	r := triggerRow(7, info, profile.TriggerCost{Trigger: profile.Trigger{Context: "softirq/net_rx"}, Samples: 1, Nanos: 10}, 10, 0)
	want := "softirq/net_rx on xdp ifindex 4 (eth0), tcx pod ns-a/loader-7d9f8b6c5-x2k4p eth0 ingress"
	if r.Workload != want {
		t.Errorf("workload %q, want %q", r.Workload, want)
	}
}

// fakePods names the containers of one cgroup.
type fakePods map[string]*collectors.Pod

func (f fakePods) Lookup(cgroup string) (*collectors.Pod, bool) { return f[cgroup], false }

// TestTriggersNamePods (issue 43): a trigger in a container the CRI named
// is its pod, NAMESPACE/POD (container NAME), and --workload takes the
// pod's names; one not named keeps its ids, a unit its unit.
func TestTriggersNamePods(t *testing.T) {
	const named = "/kubepods/besteffort/pod0f1e2d3c-4b5a-4697-8877-665544332211/ebeb6f206c6c0123456789abcdef0123456789abcdef0123456789abcdef0123"
	const unnamed = "/kubepods/besteffort/pod7a6b5c4d-4b5a-4697-8877-665544332211/a3589314a5470123456789abcdef0123456789abcdef0123456789abcdef0123"
	pod := &collectors.Pod{Namespace: "ns-a", Pod: "loader-7d9f8b6c5-x2k4p", UID: "0f1e2d3c-4b5a-4697-8877-665544332211", Container: "loader", Workload: "Deployment/loader"}
	live := sampler.NewFixture()
	live.Put(sampler.FixtureProgram{Meta: collectors.Meta{ID: 4, Name: "p"}})
	q := &Query{Sampler: live, Pods: fakePods{named: pod}}
	rows := q.triggerRows(map[uint32][]profile.TriggerCost{4: {
		{Trigger: profile.Trigger{Context: "task", Cgroup: named}, Samples: 3, Nanos: 30},
		{Trigger: profile.Trigger{Context: "task", Cgroup: unnamed}, Samples: 2, Nanos: 20},
		{Trigger: profile.Trigger{Context: "task", Cgroup: "/system.slice/cron.service"}, Samples: 1, Nanos: 10},
	}}, time.Second, nil)
	var got []string
	for _, r := range rows {
		got = append(got, r.Workload)
	}
	want := []string{"ns-a/loader-7d9f8b6c5-x2k4p (container loader)", "pod 7a6b5c4d-4b5a-4697-8877-665544332211/a3589314a547", "cron.service"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("workloads %q, want %q", got, want)
	}
	if rows[0].Pod != pod || rows[1].Pod != nil {
		t.Errorf("pods %+v, %+v: want the named one's only", rows[0].Pod, rows[1].Pod)
	}
	for _, ref := range []string{"ns-a/loader-7d9f8b6c5-x2k4p", "loader-7d9f8b6c5-x2k4p", "Deployment/loader", "ns-a/Deployment/loader", want[0]} {
		if !workloadMatches(rows[0], ref) || workloadMatches(rows[1], ref) {
			t.Errorf("--workload %q: does not pick the pod's row alone", ref)
		}
	}
}
