package profile

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// probeDrives are what makes each kind of probe fire: a getppid() for
// those on its kernel entry, a call of privtest.UprobeTarget for those
// on it.
var probeDrives = map[string]func(){
	"kprobe": getppid, "kretprobe": getppid, "kprobe_multi": getppid,
	"uprobe": uprobeTarget, "uretprobe": uprobeTarget,
}

func getppid()      { syscall.Getppid() }
func uprobeTarget() { privtest.UprobeTarget(1) }

// probeHooksAllowed are the hooks a probe kind's samples may be named:
// its own, the stats clock, and for a kretprobe and a uretprobe the entry
// and return machinery they share with others (a kprobe's entry, the
// rethook; a uprobe's breakpoint).
var probeHooksAllowed = map[string][]string{
	"kprobe": {"kprobe", "stats_clock"}, "kretprobe": {"kretprobe", "kprobe", "rethook", "stats_clock"}, "kprobe_multi": {"kprobe_multi", "stats_clock"},
	"uprobe": {"uprobe", "stats_clock"}, "uretprobe": {"uretprobe", "uprobe", "stats_clock"},
}

// probeHook says whether hook is a probe's or a bare tracepoint (where
// probes fell before they were told apart). Other hooks under the loops
// are other programs' on a shared host (a syscall tracepoint on getppid).
func probeHook(hook string) bool {
	switch hook {
	case "kprobe", "kretprobe", "kprobe_multi", "uprobe", "uretprobe", "rethook", "tracepoint":
		return true
	}
	return false
}

// TestProbeHooks: a kprobe, kretprobe and kprobe_multi program on
// getppid()'s kernel entry (in the test VM, TestKernelsInVM: this
// host's kernel has no kprobes) and a uprobe and uretprobe on a function
// of this test binary (here and in the VM), each alone, each driven by a
// thread for 2 s under a 999 Hz profile. The oracle is the thread's own
// count: the program ran once a call (bpf_stats' run_cnt is the calls
// made, exactly). The thread's samples outside the program are named as
// that probe's hook (a uretprobe's also the uprobe's breakpoint it takes
// at entry; any the stats clock), none another's nor a bare
// "tracepoint"; and the same loops with nothing attached have no hook
// sample at all.
func TestProbeHooks(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	privtest.Tracefs(t)
	kinds := privtest.ProbeKinds()
	t.Logf("on this kernel: %v", kinds)
	if vmtest.InVM() && !slices.Contains(kinds, "kretprobe") {
		t.Fatalf("the VM's kernel has kprobes: only %v", kinds)
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	for _, drive := range []string{"kprobe", "uprobe"} {
		calls, p := profiledLoop(t, probeDrives[drive], nil)
		hooks, err := HookCosts(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("nothing attached, %s's loop: %d calls, hooks %v", drive, calls, hooks)
		for h := range hooks {
			if probeHook(h) {
				t.Errorf("nothing attached, %s's loop: samples named %s: %v", drive, h, hooks)
			}
		}
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			prog := privtest.Probe(t, kind, "probe_"+kind)
			calls, p := profiledLoop(t, probeDrives[kind], prog)
			info, err := prog.Info()
			if err != nil {
				t.Fatal(err)
			}
			st, err := prog.Stats()
			if err != nil {
				t.Fatal(err)
			}
			runs := st.RunCount
			hooks, err := HookCosts(p)
			if err != nil {
				t.Fatal(err)
			}
			progNs, _ := ProgramNanos(p)
			id, _ := info.ID()
			t.Logf("%d calls, %d runs; the program %.1f ns a call", calls, runs, float64(progNs[uint32(id)])/float64(calls))
			for h, c := range hooks {
				t.Logf("%s: %d samples, %.1f ns a call", h, c.Samples, float64(c.Nanos)/float64(calls))
				for _, st := range hookStacks(p, h, 3) {
					t.Logf("  %s", st)
				}
				if probeHook(h) && !slices.Contains(probeHooksAllowed[kind], h) {
					t.Errorf("samples named %s under a %s alone", h, kind)
				}
			}
			for _, st := range hookStacks(p, "", 6) {
				t.Logf("  unnamed: %s", st)
			}
			if runs != uint64(calls) {
				t.Errorf("the program ran %d times over %d calls", runs, calls)
			}
			if hooks[kind].Samples == 0 {
				t.Errorf("no sample named %s: %v", kind, hooks)
			}
		})
	}
}

// profiledLoop calls drive in a loop on a thread of its own, pinned to
// CPU 0, for 2 s, under a 2.5 s profile of that thread at 999 Hz. prog,
// if any, is the program the symbolizer learns. It returns the calls made
// and the thread's profile.
func profiledLoop(t *testing.T, drive func(), prog *ebpf.Program) (int, *profile.Profile) {
	t.Helper()
	sym := NewSymbolizer(SymbolizerConfig{})
	if prog != nil {
		info, _ := prog.Info()
		id, _ := info.ID()
		if err := sym.Learn(uint32(id)); err != nil {
			t.Fatal(err)
		}
	}
	s := newSampler(t, SamplerConfig{Hz: 999})
	tid, wait := privtest.PinnedLoop(2*time.Second, 100, drive)
	c, err := s.Capture(context.Background(), 2500*time.Millisecond)
	calls, lerr := wait()
	if err != nil || lerr != nil {
		t.Fatal(err, lerr)
	}
	p, err := Build(c, sym, BuildOptions{Threads: []uint32{uint32(tid)}, All: true})
	if err != nil {
		t.Fatal(err)
	}
	return calls, p
}

// hookStacks are the n commonest stacks of p's samples named hook, their
// function names innermost first, with their sample counts.
func hookStacks(p *profile.Profile, hook string, n int) []string {
	counts := map[string]int64{}
	for _, s := range p.Sample {
		if first(s.Label[LabelHook]) != hook || hook == "" && len(s.Label[LabelProgID]) > 0 {
			continue
		}
		var fns []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				fns = append(fns, ln.Function.Name)
			}
		}
		counts[strings.Join(fns, ";")] += s.Value[0]
	}
	stacks := slices.Collect(maps.Keys(counts))
	slices.SortFunc(stacks, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	out := make([]string, 0, n)
	for _, st := range stacks[:min(n, len(stacks))] {
		out = append(out, fmt.Sprintf("%d %s", counts[st], st))
	}
	return out
}
