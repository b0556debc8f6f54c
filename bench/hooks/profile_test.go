package hooks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	pprofile "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
	"github.com/bpfperf/bpfperf/profile"
)

// TestHookCostFromProfile: what a syscall tracepoint's program and hook
// cost each getppid(), as a CPU profile sees it (the samples of the
// calling thread in the program and in the hook's frames, profile.hook.go,
// over the calls made), agrees within 30% with what bench hooks measures
// for the same hook by difference, with and without the program, plus the
// spread (IQR) of bench hooks' own rounds in the same run; and no part of
// it is negative. The spread is how much this host moved the same
// measurement while the test ran: on a quiet one a few ns, and the bound
// stays 30%; CI's run beside another engineer's benchmarks read 268.9 ns
// from the profile against 192.4 with an IQR of 57.1, rounds 30% apart
// among themselves.
//
// Two tries: the bench and the profile run one after the other, and CI
// once read 310.4 ns from the profile against 200.1 with an IQR of 8.0
// (the host slowed between them, not within the bench's rounds). A
// profile that charges the hook wrongly is wrong in both tries.
func TestHookCostFromProfile(t *testing.T) {
	privtest.Root(t)
	for try := 1; ; try++ {
		// A subtest, so that its program is detached before the next.
		var fromProfile float64
		var cost bench.Summary
		t.Run(fmt.Sprintf("try%d", try), func(t *testing.T) {
			_, fromProfile, cost = hookCostFromProfile(t, "tracepoint", "syscall_enter", func() *ebpf.Program {
				return privtest.GetppidTracepoint(t, "hook_profile", 1)
			})
		})
		if t.Failed() {
			return
		}
		bound := 0.3*cost.Median + cost.IQR
		if math.Abs(fromProfile-cost.Median) <= bound {
			return
		}
		msg := fmt.Sprintf("from the profile %.1f ns a call, bench hooks %.1f (IQR %.1f): more than 30%% plus the IQR (%.1f ns) apart", fromProfile, cost.Median, cost.IQR, bound)
		if try == 2 {
			t.Fatal(msg + ", in both tries")
		}
		t.Logf("try 1: %s; again", msg)
	}
}

// TestTrampolineCostFromProfile (in the VM: TestHooksInVM, where fentry
// works): an fentry program on getppid's body. Its trampoline's samples
// are the hook "trampoline:__do_sys_getppid", named from BTF where the
// stack says __x64_sys_getppid, and every sample under the trampoline
// outside the program is counted as its hook or its stats clock (an
// interrupt taken there aside). The figure is logged beside bench hooks'
// and not compared: under the emulated CPU the same loop's cost moves by
// 40% from one capture to the next, and the profile saw 54 ns a call
// where the bench measured 206.
func TestTrampolineCostFromProfile(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry: runs in the VM (TestHooksInVM)")
	}
	privtest.Root(t)
	p, _, _ := hookCostFromProfile(t, "fentry", profile.HookTrampoline+privtest.GetppidBody, func() *ebpf.Program {
		return privtest.GetppidFentry(t, "tramp_profile")
	})
	var under, counted int64
	for _, s := range p.Sample {
		if len(s.Label[profile.LabelProgID]) > 0 || !slices.ContainsFunc(s.Location, func(l *pprofile.Location) bool {
			return len(l.Line) > 0 && strings.HasPrefix(l.Line[0].Function.Name, "bpf_trampoline_")
		}) {
			continue
		}
		under += s.Value[0]
		if len(s.Label[profile.LabelHook]) > 0 {
			counted += s.Value[0]
		}
	}
	t.Logf("%d of %d samples under the trampoline, outside the program, counted as its hook", counted, under)
	if under == 0 || float64(counted) < 0.9*float64(under) {
		t.Errorf("%d of %d samples under the trampoline counted as its hook, want 90%% or more", counted, under)
	}
}

// TestKprobeCostFromProfile (in the VM: TestHooksInVM, where kprobes
// work): an empty kprobe on getppid's entry. Its samples outside the
// program are the hook "kprobe" (the ftrace entry, kprobe_perf_func,
// trace_call_bpf) or its stats clock; the figure is logged beside bench
// hooks' and not compared, as the trampoline's is not: under the emulated
// CPU the loop's cost moves too much between captures.
func TestKprobeCostFromProfile(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs kprobes: runs in the VM (TestHooksInVM)")
	}
	privtest.Root(t)
	hookCostFromProfile(t, "kprobe", "kprobe", func() *ebpf.Program {
		return privtest.Probe(t, "kprobe", "kprobe_profile")
	})
}

// hookCostFromProfile measures benchHook with bench hooks, then attaches
// a program like it (attach) and profiles a thread making getppid()
// calls. It fails unless wantHook has samples and no hook's cost is
// negative, and returns the profile with the hooks' and the program's
// cost a call from it and from the bench.
func hookCostFromProfile(t *testing.T, benchHook, wantHook string, attach func() *ebpf.Program) (p *pprofile.Profile, fromProfile float64, cost bench.Summary) {
	privtest.LockStats(t) // stats off in both: the bench's Cost is without them
	privtest.Tracefs(t)   // the tracepoint hook is found through it
	rs, err := Measure(Config{Hooks: []string{benchHook}, Rounds: 9, Syscalls: 1_000_000, Packets: 1})
	if err != nil {
		t.Fatal(err)
	}
	measured := rs[0]
	if measured.Unavailable != "" || measured.StatsHeld {
		t.Fatalf("bench: %+v", measured)
	}

	prog := attach()
	info, _ := prog.Info()
	id, _ := info.ID()
	sym := profile.NewSymbolizer(profile.SymbolizerConfig{})
	if err := sym.Learn(uint32(id)); err != nil {
		t.Fatal(err)
	}
	s, err := profile.NewSampler(profile.SamplerConfig{Hz: 999})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tid, wait := privtest.PinnedLoop(2*time.Second, 1000, func() { syscall.Getppid() })
	c, err := s.Capture(context.Background(), 2500*time.Millisecond)
	calls, lerr := wait()
	if err != nil || lerr != nil {
		t.Fatal(err, lerr)
	}
	p, err = profile.Build(c, sym, profile.BuildOptions{Threads: []uint32{uint32(tid)}})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := profile.HookCosts(p)
	if err != nil {
		t.Fatal(err)
	}
	progNs, _ := profile.ProgramNanos(p)
	perCall := func(ns int64) float64 { return float64(ns) / float64(calls) }
	var hookNs int64
	for h, c := range hooks {
		hookNs += c.Nanos
		t.Logf("%s: %d samples, %.1f ns a call", h, c.Samples, perCall(c.Nanos))
		if c.Nanos < 0 {
			t.Errorf("%s: negative", h)
		}
	}
	fromProfile = perCall(hookNs + progNs[uint32(id)])
	t.Logf("%d getppid() calls: from the profile, hook %.1f + program %.1f = %.1f ns a call; bench hooks: %.1f ns (IQR %.1f)",
		calls, perCall(hookNs), perCall(progNs[uint32(id)]), fromProfile, measured.Cost.Median, measured.Cost.IQR)
	if hooks[wantHook].Samples == 0 {
		t.Fatalf("no samples in %s: %+v", wantHook, hooks)
	}
	return p, fromProfile, measured.Cost
}
