package hooks

import (
	"context"
	"math"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/profile"
)

// TestHookCostFromProfile: what a syscall tracepoint's program and hook
// cost each getppid(), as a CPU profile sees it (the samples of the
// calling thread in the program and in the hook's frames, profile.hook.go,
// over the calls made), agrees within 30% with what bench hooks measures
// for the same hook by difference, with and without the program; and no
// part of it is negative.
func TestHookCostFromProfile(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t) // stats off in both: the bench's Cost is without them
	rs, err := Measure(Config{Hooks: []string{"tracepoint"}, Rounds: 9, Syscalls: 1_000_000, Packets: 1})
	if err != nil {
		t.Fatal(err)
	}
	bench := rs[0]
	if bench.Unavailable != "" || bench.StatsHeld {
		t.Fatalf("bench: %+v", bench)
	}

	prog := privtest.GetppidTracepoint(t, "hook_profile", 1)
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
	type loop struct {
		tid, calls int
		err        error
	}
	started, done := make(chan int), make(chan loop)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l := loop{tid: unix.Gettid()}
		var cpus unix.CPUSet
		cpus.Set(0)
		l.err = unix.SchedSetaffinity(0, &cpus)
		started <- l.tid
		for stop := time.Now().Add(2 * time.Second); time.Now().Before(stop); l.calls += 1000 {
			for range 1000 {
				syscall.Getppid()
			}
		}
		done <- l
	}()
	tid := <-started
	c, err := s.Capture(context.Background(), 2500*time.Millisecond)
	l := <-done
	if err != nil || l.err != nil {
		t.Fatal(err, l.err)
	}
	p, err := profile.Build(c, sym, profile.BuildOptions{Threads: []uint32{uint32(tid)}})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := profile.HookCosts(p)
	if err != nil {
		t.Fatal(err)
	}
	progNs, _ := profile.ProgramNanos(p)
	perCall := func(ns int64) float64 { return float64(ns) / float64(l.calls) }
	var hookNs int64
	for h, c := range hooks {
		hookNs += c.Nanos
		t.Logf("%s: %d samples, %.1f ns a call", h, c.Samples, perCall(c.Nanos))
		if c.Nanos < 0 {
			t.Errorf("%s: negative", h)
		}
	}
	fromProfile := perCall(hookNs + progNs[uint32(id)])
	t.Logf("%d getppid() calls: from the profile, hook %.1f + program %.1f = %.1f ns a call; bench hooks: %.1f ns (IQR %.1f)",
		l.calls, perCall(hookNs), perCall(progNs[uint32(id)]), fromProfile, bench.Cost.Median, bench.Cost.IQR)
	if hooks["syscall_enter"].Samples == 0 || progNs[uint32(id)] == 0 {
		t.Fatalf("no samples in the hook (%+v) or the program (%d ns)", hooks, progNs[uint32(id)])
	}
	if math.Abs(fromProfile-bench.Cost.Median) > 0.3*bench.Cost.Median {
		t.Errorf("from the profile %.1f ns a call, bench hooks %.1f: more than 30%% apart", fromProfile, bench.Cost.Median)
	}
}
