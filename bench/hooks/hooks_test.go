package hooks

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// testRounds is enough rounds for a median that one disturbed round does
// not move, in a fraction of a second a hook.
const testRounds = 5

// measured runs Measure on names with few rounds and returns the results
// by hook, failing on any the kernel refused.
func measured(t *testing.T, names ...string) map[string]Result {
	t.Helper()
	privtest.Root(t)
	privtest.Tracefs(t) // the tracepoint hook is found through it
	rs, err := Measure(Config{Hooks: names, Rounds: testRounds, Syscalls: 50_000, Packets: 5_000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Result{}
	for _, r := range rs {
		t.Logf("%s: without %.1f ns, cost %.1f ns (stats on %.1f), run_time %.1f ns, outside %.1f ns, %.4f runs/event, stats held %v%s",
			r.Hook, r.Without.Median, r.Cost.Median, r.CostStats.Median, r.Run.Median, r.Outside.Median, r.RunsPerEvent, r.StatsHeld, r.Unavailable)
		out[r.Hook] = r
	}
	if len(out) != len(names) {
		t.Fatalf("%d results for %d hooks", len(out), len(names))
	}
	noneLeft(t)
	return out
}

// noneLeft fails when a program of the bench is still loaded a few
// seconds after it: every round detaches, and every site closes its
// program (the kernel frees a detached one after an RCU grace period, so
// not at once).
func noneLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := loadedHookPrograms()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("programs %v (bpfperf_hook) still loaded 5 s after the bench", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func loadedHookPrograms() []ebpf.ProgramID {
	var out []ebpf.ProgramID
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return out
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, err := p.Info()
		p.Close()
		if err == nil && info.Name == "bpfperf_hook" {
			out = append(out, id)
		}
	}
}

// checkMeasured asserts what holds of any hook measured: its program ran
// once per event made (within perEvent above 1, for hooks that see other
// events too), and the events cost more than run_time_ns shows.
func checkMeasured(t *testing.T, r Result, perEvent float64) {
	t.Helper()
	if r.Unavailable != "" {
		t.Errorf("%s: not measured: %s", r.Hook, r.Unavailable)
		return
	}
	if r.RunsPerEvent < 1 || r.RunsPerEvent > perEvent {
		t.Errorf("%s: %.4f runs per event, want 1 to %.2f", r.Hook, r.RunsPerEvent, perEvent)
	}
	if r.Run.Median <= 0 || r.Without.Median <= 0 {
		t.Errorf("%s: run time %.1f ns, time per event without %.1f ns: want both above 0", r.Hook, r.Run.Median, r.Without.Median)
	}
	if r.Rounds != testRounds {
		t.Errorf("%s: %d rounds, want %d", r.Hook, r.Rounds, testRounds)
	}
}

// The syscall hooks: a tracepoint sees only getppid(), one run each;
// raw_tp and tp_btf on sys_enter see every system call on the host, so at
// least one run an event and as many more as the host's other system
// calls (2.8 a getppid() beside two busy `yes`).
// Each costs an event well above its run time (measured: tracepoint 80
// ns an event with stats on, 32 ns of run time), so more than run_time
// shows is there to see.
func TestSyscallHooks(t *testing.T) {
	rs := measured(t, "tracepoint", "raw_tp", "tp_btf")
	checkMeasured(t, rs["tracepoint"], 1.01)
	checkMeasured(t, rs["raw_tp"], math.Inf(1))
	checkMeasured(t, rs["tp_btf"], math.Inf(1))
	for _, r := range rs {
		if r.Outside.Median <= 0 {
			t.Errorf("%s: %.1f ns a getppid() outside run_time_ns, want above 0 (cost with stats %.1f ns, run time %.1f ns)",
				r.Hook, r.Outside.Median, r.CostStats.Median, r.Run.Median)
		}
	}
}

// The network hooks see the packets sent, one run each (and now and then
// a neighbour or router message of the veth's own), and leave no veth
// behind.
func TestNetHooks(t *testing.T) {
	rs := measured(t, "xdp", "tc", "socket_filter")
	for _, name := range []string{"xdp", "tc", "socket_filter"} {
		checkMeasured(t, rs[name], 1.01)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "bpfh") {
			t.Errorf("veth %s left behind", l.Attrs().Name)
		}
	}
}

// fentry and kprobe: this host's kernel refuses both, and the result
// says so in one line with no figures; the test VM's kernels allow them
// (TestHooksInVM), and there they are measured like the others.
func TestTracingHooks(t *testing.T) {
	rs := measured(t, "fentry", "kprobe")
	for _, r := range rs {
		if vmtest.InVM() {
			checkMeasured(t, r, 1.01)
			continue
		}
		if r.Unavailable == "" {
			t.Logf("%s measured on this kernel", r.Hook)
			checkMeasured(t, r, 1.01)
			continue
		}
		if strings.Contains(r.Unavailable, "\n") || !strings.Contains(r.Unavailable, "refuses") {
			t.Errorf("%s: %q, want one line saying the kernel refuses it", r.Hook, r.Unavailable)
		}
		if r.Cost != (bench.Summary{}) || r.RunsPerEvent != 0 {
			t.Errorf("%s: not measured, yet has figures: %+v", r.Hook, r)
		}
	}
}

// TestHooksInVM runs the hooks this host refuses in the test VM. Only
// those: the syscall hooks run on this host, and under the VM's emulated
// CPU, attaching and detaching tracepoints round after round (each flips
// the kernel's static keys, patching code other threads run) once left
// CPU 0 spinning in syscall_trace_enter until the guest's watchdog
// panicked, three boots in a row.
func TestHooksInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{}, []string{"TestTracingHooks", "TestTrampolineCostFromProfile", "TestKprobeCostFromProfile"})
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Hooks: []string{"nope"}, Rounds: 1, Syscalls: 1, Packets: 1},
		{Rounds: 0, Syscalls: 1, Packets: 1},
		{Rounds: 1, Syscalls: 1, Packets: 1, CPU: -1},
		{Rounds: 1, Syscalls: 1, Packets: 1, CPU: 1 << 20},
	} {
		_, err := Measure(cfg)
		if !errors.Is(err, ErrUnknownHook) && !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: %v, want ErrUnknownHook or ErrBadConfig", cfg, err)
		}
	}
}
