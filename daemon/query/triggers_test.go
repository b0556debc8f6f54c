package query

import (
	"reflect"
	"testing"

	"github.com/bpfperf/bpfperf/collectors"
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
