package query

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// TestFiresAt: each hook the profile names is charged to the programs
// attached where it fires, and to no other; a trampoline to the tracing
// programs on its function only.
func TestFiresAt(t *testing.T) {
	tp := collectors.AttachPoint{Type: "perf_event", Target: "tracepoint sys_enter_getppid"}
	fentry := collectors.AttachPoint{Type: "tracing", Target: "fentry __do_sys_getppid"}
	fexit := collectors.AttachPoint{Type: "tracing", Target: "fexit __do_sys_getppid"}
	onProg := collectors.AttachPoint{Type: "tracing", Target: "fentry prog 42"}
	kprobe := collectors.AttachPoint{Type: "perf_event", Target: "kprobe __x64_sys_getppid"}
	kretprobe := collectors.AttachPoint{Type: "perf_event", Target: "kretprobe __x64_sys_getppid"}
	multi := collectors.AttachPoint{Type: "kprobe_multi", Target: "1 kprobes"}
	uprobe := collectors.AttachPoint{Type: "perf_event", Target: "uprobe /usr/bin/app"}
	uretprobe := collectors.AttachPoint{Type: "perf_event", Target: "uretprobe /usr/bin/app"}
	bareKprobe := collectors.AttachPoint{Type: "perf_event", Target: "kprobe"} // the kernel named no function
	for _, c := range []struct {
		hook   string
		attach collectors.AttachPoint
		want   bool
	}{
		{"syscall_enter", tp, true},
		{"syscall_exit", tp, false},
		{"trampoline:__do_sys_getppid", fentry, true},
		{"trampoline:__do_sys_getppid", fexit, true},
		{"trampoline:__do_sys_getpid", fentry, false},
		{"trampoline:__do_sys_getppid", tp, false},
		{"trampoline:42", onProg, false},
		{"syscall_enter", fentry, false},
		{"stats_clock", fentry, true},
		{"kprobe", kprobe, true},
		{"kprobe", bareKprobe, true},
		{"kprobe", kretprobe, true}, // a kretprobe's entry is a kprobe
		{"rethook", kretprobe, true},
		{"rethook", multi, true},
		{"rethook", kprobe, false},
		{"kprobe", multi, false},
		{"kretprobe", kretprobe, true},
		{"kretprobe", kprobe, false},
		{"kprobe_multi", multi, true},
		{"kprobe_multi", kprobe, false},
		{"uprobe", uprobe, true},
		{"uprobe", uretprobe, true}, // a uretprobe's entry takes the uprobe's breakpoint
		{"uretprobe", uretprobe, true},
		{"uretprobe", uprobe, false},
		{"uprobe", kprobe, false},
		{"tracepoint", tp, false},
	} {
		if got := firesAt(c.hook, []collectors.AttachPoint{c.attach}); got != c.want {
			t.Errorf("firesAt(%q, %+v) = %v, want %v", c.hook, c.attach, got, c.want)
		}
	}
}

// fakeTriggered answers every range with one window's hook costs.
type fakeTriggered struct{ tr profiling.Triggered }

func (f fakeTriggered) Triggers(from, to time.Time) (profiling.Triggered, error) { return f.tr, nil }
func (f fakeTriggered) LastTriggers() (map[uint32][]profile.TriggerCost, time.Duration) {
	return nil, 0
}

// TestHooksOverUnloaded: a hook's cost over past windows is charged to the
// programs loaded then and attached where it fires: one unloaded since,
// with the attach points the store kept, and its runs from the store; not
// one loaded after the windows, nor one unloaded before them.
func TestHooksOverUnloaded(t *testing.T) {
	db := openStore(t)
	live := sampler.NewFixture()
	fentry := []collectors.AttachPoint{{Type: "tracing", Target: "fentry vfs_read"}}
	tp := []collectors.AttachPoint{{Type: "perf_event", Target: "tracepoint sys_enter_getppid"}}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rec := func(id uint32, name string, attach []collectors.AttachPoint, first time.Time) store.Program {
		meta, err := json.Marshal(collectors.Meta{ID: id, Name: name, Type: "tracing", Attach: attach})
		if err != nil {
			t.Fatal(err)
		}
		return store.Program{Key: store.InstanceKey{ID: id}, ID: id, Name: name, Type: "tracing", Tag: "aaaa", FirstSeen: first, Meta: meta}
	}
	getppid := rec(40, "getppid_tp", tp, at(-60))
	during := rec(41, "vfs_read_gone", fentry, at(-60))
	before := rec(43, "vfs_read_old", fentry, at(-60))
	after := rec(42, "vfs_read_new", fentry, at(3600))
	for _, tk := range []store.Tick{
		{Time: at(-60), Loaded: []store.Program{getppid, during, before}},
		{Time: at(-30), Unloaded: []store.InstanceKey{before.Key}},
		{Time: at(0), Samples: samples(during.Key, 1000, 100_000)},
		{Time: at(5), Samples: samples(during.Key, 3000, 300_000), Unloaded: []store.InstanceKey{during.Key}},
		{Time: at(3600), Loaded: []store.Program{after}},
	} {
		if err := db.WriteTick(tk); err != nil {
			t.Fatal(err)
		}
	}
	live.Put(sampler.FixtureProgram{Meta: collectors.Meta{ID: 40, Name: "getppid_tp", Attach: tp}, CurAt: at(3600)})
	live.Put(sampler.FixtureProgram{Meta: collectors.Meta{ID: 42, Name: "vfs_read_new", Attach: fentry}, CurAt: at(3600)})
	q := &Query{Store: db, Sampler: live, Now: func() time.Time { return at(3700) }, Triggered: fakeTriggered{profiling.Triggered{
		Hooks:   map[string]profile.HookCost{"trampoline:vfs_read": {Samples: 10, Nanos: 400_000}, "syscall_enter": {Samples: 1, Nanos: 1000}},
		Windows: 1, Start: at(0), Duration: 10 * time.Second,
	}}}
	h, err := q.Hooks("", at(0), at(10))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]api.HookProgram{}
	for _, r := range h.Rows {
		got[r.Hook] = r.Programs
	}
	want := map[string][]api.HookProgram{
		"trampoline:vfs_read": {{ID: 41, Name: "vfs_read_gone", Runs: 2000, RunTimeNs: 200_000}},
		"syscall_enter":       {{ID: 40, Name: "getppid_tp"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("charged:\n got %+v\nwant %+v", got, want)
	}
	if r := h.Rows[0]; r.Hook != "trampoline:vfs_read" || r.NsPerRun == nil || *r.NsPerRun != 200 {
		t.Errorf("first row %+v, want trampoline:vfs_read at 200 ns a run", r)
	}
	// The unloaded program by name: its hook, from the store.
	if h, err := q.Hooks("vfs_read_gone", at(0), at(10)); err != nil || len(h.Rows) != 1 || h.Rows[0].Hook != "trampoline:vfs_read" {
		t.Errorf("hooks of the unloaded program: %+v, %v", h.Rows, err)
	}
}
