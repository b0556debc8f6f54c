package collectors

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// Tests named TestCountersExact* need a kernel that allows fentry/fexit:
// they run inside the test VM (TestTracingInVM boots it) and skip on the
// host. The others run on the host and in the VM.

func TestCounterValueScaled(t *testing.T) {
	for _, c := range []struct {
		v      CounterValue
		want   float64
		wantOK bool
	}{
		{CounterValue{Counter: 100, Enabled: 50, Running: 50}, 100, true},
		{CounterValue{Counter: 100, Enabled: 100, Running: 25}, 400, true}, // multiplexed a quarter of the time
		{CounterValue{Counter: 0, Enabled: 10, Running: 10}, 0, true},
		{CounterValue{Counter: 5, Enabled: 10, Running: 0}, 0, false}, // never counted: absent
	} {
		got, ok := c.v.Scaled()
		if got != c.want || ok != c.wantOK {
			t.Errorf("%+v.Scaled() = %v, %v; want %v, %v", c.v, got, ok, c.want, c.wantOK)
		}
	}
	r := CounterReading{Exits: 5, Counted: 4, Values: []CounterValue{{Event: perfevent.CPUClock, Counter: 100, Enabled: 1, Running: 1}}}
	if n, ok := r.PerRun(perfevent.CPUClock); !ok || n != 25 {
		t.Errorf("PerRun(cpu-clock) = %v, %v; want 25, true", n, ok)
	}
	if _, ok := r.PerRun(perfevent.Cycles); ok {
		t.Error("PerRun(cycles) of a reading without cycles: want absent")
	}
	if _, ok := (CounterReading{}).PerRun(perfevent.CPUClock); ok {
		t.Error("PerRun with no runs: want absent")
	}
}

func TestCounterErrorMatches(t *testing.T) {
	err := error(&CounterError{Op: "open", Reason: perfevent.ErrNoPMU, Err: unix.ENOENT})
	for _, target := range []error{perfevent.ErrNoPMU, ebpf.ErrNotSupported, unix.ENOENT} {
		if !errors.Is(err, target) {
			t.Errorf("%v does not match %v", err, target)
		}
	}
	if errors.Is(err, ErrTracingRefused) {
		t.Errorf("%v matches ErrTracingRefused", err)
	}
	if errors.Is(ErrTooManyTargets, ebpf.ErrNotSupported) {
		t.Error("a limit is not 'not supported'")
	}
}

func TestNewExactCountersChecksConfig(t *testing.T) {
	for _, cfg := range []ExactConfig{
		{Events: []perfevent.Event{perfevent.CPUClock, perfevent.CPUClock}},
		{Events: []perfevent.Event{perfevent.CPUClock, perfevent.Cycles, perfevent.Instructions, perfevent.LLCMisses, perfevent.CPUClock}},
		{Events: []perfevent.Event{42}},
		{MaxTargets: -1},
	} {
		if _, err := NewExactCounters(cfg); err == nil {
			t.Errorf("NewExactCounters(%+v): want an error", cfg)
		}
	}
	c, err := NewExactCounters(ExactConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := c.Events(); len(ev) != 1 || ev[0] != perfevent.CPUClock {
		t.Errorf("default events %v, want [cpu-clock]", ev)
	}
	if _, err := c.Start(1, 0); err == nil {
		t.Error("Start with a zero window: want an error")
	}
}

// TestProbeCounters checks that each mechanism is either available or
// refused with its exact reason, never a bare failure. On our hosts (no
// PMU, tracing refused) both are refused; in the VM exact counting works.
func TestProbeCounters(t *testing.T) {
	privtest.Root(t)
	s := ProbeCounters()
	t.Logf("events %v; PMU: %v; exact: %v", s.Events, orOK(s.PMU), orOK(s.Exact))
	if len(s.Events) == 0 || s.Events[0] != perfevent.CPUClock {
		t.Errorf("events %v: cpu-clock must always open", s.Events)
	}
	if s.PMU != nil && !(errors.Is(s.PMU, perfevent.ErrNoPMU) && errors.Is(s.PMU, ebpf.ErrNotSupported)) {
		t.Errorf("PMU: %v does not match perfevent.ErrNoPMU", s.PMU)
	}
	if s.PMU != nil && len(s.DefaultEvents()) != 1 {
		t.Errorf("without a PMU the default events are %v, want [cpu-clock]", s.DefaultEvents())
	}
	if s.Exact != nil && !(errors.Is(s.Exact, ErrTracingRefused) && errors.Is(s.Exact, ebpf.ErrNotSupported)) {
		t.Errorf("exact: %v does not match ErrTracingRefused", s.Exact)
	}
	if vmtest.InVM() && s.Exact != nil {
		t.Errorf("the VM's kernel allows fentry, but the probe says %v", s.Exact)
	}
}

func orOK(err error) any {
	if err == nil {
		return "available"
	}
	return err
}

// TestCountersRefusedHoldsNothing: where the kernel refuses tracing
// programs, Start says so with ErrTracingRefused and leaves no fd, window
// or program behind.
func TestCountersRefusedHoldsNothing(t *testing.T) {
	privtest.Root(t)
	if err := ProbeCounters().Exact; err == nil {
		t.Skip("this kernel allows fentry/fexit; the refusal path cannot be seen here")
	}
	c, err := NewExactCounters(ExactConfig{})
	if err != nil {
		t.Fatal(err)
	}
	target := loadTarget(t, 10)
	fds := openFDs(t)
	w, err := c.Start(progID(t, target), time.Minute)
	if err == nil {
		w.Close()
		t.Fatal("Start succeeded where the probe says tracing is refused")
	}
	if !errors.Is(err, ErrTracingRefused) {
		t.Fatalf("Start: %v, want ErrTracingRefused", err)
	}
	t.Logf("Start: %v", err)
	if got := openFDs(t); got != fds {
		t.Errorf("%d fds open after the refused Start, %d before", got, fds)
	}
	if len(c.Active()) != 0 {
		t.Errorf("active targets after a refused Start: %v", c.Active())
	}
}

// TestCountersNoBTF: fentry needs BTF in its target.
func TestCountersNoBTF(t *testing.T) {
	privtest.Root(t)
	c, err := NewExactCounters(ExactConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, id := loadSocketFilter(t, "nobtf") // loaded from instructions, no BTF
	w, err := c.Start(id, time.Minute)
	if err == nil {
		w.Close()
		t.Fatal("Start on a target without BTF succeeded")
	}
	if !errors.Is(err, ErrNoBTF) {
		t.Errorf("Start: %v, want ErrNoBTF", err)
	}
	if _, err := c.Start(math.MaxUint32, time.Minute); !errors.Is(err, ErrGone) {
		t.Errorf("Start on a missing program: %v, want ErrGone", err)
	}
}

func TestCountersExactCountsEachRun(t *testing.T) {
	c := exactCounters(t, ExactConfig{})
	target := loadTarget(t, 100)
	w := startWindow(t, c, target, time.Minute)
	const runs = 1000
	if err := privtest.Run(target, runs); err != nil {
		t.Fatal(err)
	}
	r, err := w.Read()
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != runs || r.Exits != runs {
		t.Errorf("fentry saw %d runs, fexit %d; want %d each", r.Entries, r.Exits, runs)
	}
	// Every run's difference must be counted: a run is left out only when
	// the clock stands still, as sched_clock does on a kernel that finds
	// its TSC unstable (the harness boots with tsc=reliable).
	if r.Counted != runs {
		t.Errorf("%d runs counted of %d", r.Counted, runs)
	}
	v := r.Values[0]
	if v.Event != perfevent.CPUClock || v.Counter == 0 || v.Enabled == 0 || v.Running == 0 {
		t.Errorf("cpu-clock total %+v: want all non-zero", v)
	}
	perRun, _ := r.PerRun(perfevent.CPUClock)
	t.Logf("%d runs, %d counted: cpu-clock %.0f ns/run", runs, r.Counted, perRun)
}

// The counted interval is the target's work plus a fixed part (half of
// each counter read, the trampoline's call): the work is what must scale.
// Under TCG on a shared host the guest's clock also counts time the vCPU
// thread waits for a host CPU, and such a stall lands on a few runs at a
// time (a batch of 20 short runs once read 10 µs each in all 8 batches
// while the long target had a clean one). So the window is read after
// every single run, the three targets take turns, and each keeps its
// least cost of one run: a stall spoils the run it hit, not the measure.
func TestCountersExactGrowsWithWork(t *testing.T) {
	c := exactCounters(t, ExactConfig{MaxTargets: 3})
	iters := []int32{1, 10000, 100000}
	type counted struct {
		target *ebpf.Program
		w      *CounterWindow
		prev   CounterReading
		least  float64
	}
	cs := make([]*counted, len(iters))
	for i, n := range iters {
		target := loadTarget(t, n)
		w := startWindow(t, c, target, time.Minute)
		// Warm up: TCG translates fresh code on its first runs.
		if err := privtest.Run(target, 20); err != nil {
			t.Fatal(err)
		}
		prev, err := w.Read()
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = &counted{target: target, w: w, prev: prev, least: math.Inf(1)}
	}
	for range 60 {
		for _, c := range cs {
			if err := privtest.Run(c.target, 1); err != nil {
				t.Fatal(err)
			}
			r, err := c.w.Read()
			if err != nil {
				t.Fatal(err)
			}
			if n := r.Exits - c.prev.Exits; n != 1 {
				t.Fatalf("1 run counted as %d", n)
			}
			if r.Counted-c.prev.Counted == 1 {
				c.least = min(c.least, float64(r.Values[0].Counter-c.prev.Values[0].Counter))
			}
			c.prev = r
		}
	}
	fixed, short, long := cs[0].least, cs[1].least, cs[2].least
	ratio := (long - fixed) / (short - fixed)
	t.Logf("cpu-clock per run: %.0f ns for 1 iteration, %.0f ns for 10,000, %.0f ns for 100,000: "+
		"%.2fx raw, %.2fx without the fixed part", fixed, short, long, long/short, ratio)
	if ratio < 8 || ratio > 12 {
		t.Errorf("10x the loop counted %.2fx, want about 10x", ratio)
	}
}

func TestCountersExactAgreesWithRunTime(t *testing.T) {
	c := exactCounters(t, ExactConfig{})
	statsOn(t)
	target := loadTarget(t, 50000)
	w := startWindow(t, c, target, time.Minute)
	// Three batches, compared by the median of their ratios: under TCG a
	// stray host stall lands in one clock and not the other now and then
	// (one batch in five read 22% apart), which the median keeps out.
	var ratios []float64
	var clockPrev float64
	var counted uint64
	for range 3 {
		before, err := target.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if err := privtest.Run(target, 300); err != nil {
			t.Fatal(err)
		}
		after, err := target.Stats()
		if err != nil {
			t.Fatal(err)
		}
		r, err := w.Read()
		if err != nil {
			t.Fatal(err)
		}
		clockNow, _ := r.Values[0].Scaled()
		clock, runTime := clockNow-clockPrev, float64(after.Runtime-before.Runtime)
		clockPrev = clockNow
		t.Logf("300 runs: cpu-clock %.0f ns, run_time %.0f ns (%.1f%% apart)", clock, runTime, 100*(clock-runTime)/runTime)
		ratios = append(ratios, clock/runTime)
		counted += after.RunCount - before.RunCount
		if counted != r.Exits {
			t.Errorf("run_cnt grew by %d, fexit counted %d", counted, r.Exits)
		}
	}
	if m := medianFloat(ratios); math.Abs(m-1) > 0.2 {
		t.Errorf("cpu-clock and run_time differ by more than 20%% (median ratio %.3f of %v)", m, ratios)
	}
}

func TestCountersExactDetachRemovesCost(t *testing.T) {
	c := exactCounters(t, ExactConfig{})
	checkDetachRemovesCost(t, "counting", func(target *ebpf.Program) (stop func()) {
		return startWindow(t, c, target, time.Minute).Stop
	})
	waitNoCounterPrograms(t)
}

// checkDetachRemovesCost: a window (attach starts it, stop ends it) adds
// to each run of an empty target's run_time, and once stopped no longer.
func checkDetachRemovesCost(t *testing.T, doing string, attach func(target *ebpf.Program) (stop func())) {
	t.Helper()
	statsOn(t)
	target := loadTarget(t, 1)
	cost := func() float64 {
		t.Helper()
		// The median of a few batches keeps a stray interrupt out.
		var batches []float64
		for range 5 {
			batches = append(batches, statsMean(t, target, func() {
				if err := privtest.Run(target, 300); err != nil {
					t.Fatal(err)
				}
			}))
		}
		return medianFloat(batches)
	}
	base := cost()
	stop := attach(target)
	during := cost()
	stop()
	after := cost()
	t.Logf("run_time per run of an empty target: %.0f ns before, %.0f ns %s, %.0f ns after", base, during, doing, after)
	if during <= base {
		t.Errorf("%s cost nothing (%.0f <= %.0f ns): is the trampoline inside run_time?", doing, during, base)
	}
	if after-base > 0.25*(during-base) {
		t.Errorf("after detaching a run costs %.0f ns, %.0f ns before: cost left behind", after, base)
	}
}

func TestCountersExactStopsWhenOwnerLetsGo(t *testing.T) {
	c := exactCounters(t, ExactConfig{OwnerPoll: 20 * time.Millisecond})
	target := loadTarget(t, 10)
	id := progID(t, target)
	w := startWindow(t, c, target, time.Minute)
	if !w.Tracked() {
		t.Fatal("the window does not watch a target our process holds by fd")
	}
	if err := privtest.Run(target, 10); err != nil {
		t.Fatal(err)
	}
	target.Close()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the window still counts 5s after the target's only fd closed")
	}
	if got := w.Stopped(); got != StopReleased {
		t.Errorf("stopped: %q, want %q", got, StopReleased)
	}
	if r, err := w.Read(); err != nil || r.Exits != 10 {
		t.Errorf("Read after the stop: %+v, %v; want 10 runs", r, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err == nil {
			p.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d still loaded 5s after its owner let go", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCountersExactWindowEnds(t *testing.T) {
	c := exactCounters(t, ExactConfig{})
	target := loadTarget(t, 10)
	w := startWindow(t, c, target, 100*time.Millisecond)
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a 100ms window still counts after 5s")
	}
	if got := w.Stopped(); got != StopEnded {
		t.Errorf("stopped: %q, want %q", got, StopEnded)
	}
	if len(c.Active()) != 0 {
		t.Errorf("active after the window ended: %v", c.Active())
	}
	if err := privtest.Run(target, 5); err != nil {
		t.Fatal(err)
	}
	if r, _ := w.Read(); r.Exits != 0 {
		t.Errorf("runs after the window ended were counted: %+v", r)
	}
	waitNoCounterPrograms(t)
}

func TestCountersExactTooManyTargets(t *testing.T) {
	c := exactCounters(t, ExactConfig{MaxTargets: 1})
	a, b := loadTarget(t, 1), loadTarget(t, 1)
	startWindow(t, c, a, time.Minute)
	w, err := c.Start(progID(t, b), time.Minute)
	if err == nil {
		w.Close()
		t.Fatal("a second target with MaxTargets 1 was accepted")
	}
	if !errors.Is(err, ErrTooManyTargets) {
		t.Errorf("Start: %v, want ErrTooManyTargets", err)
	}
	if _, err := c.Start(progID(t, a), time.Minute); err == nil || errors.Is(err, ErrTooManyTargets) {
		t.Errorf("Start on a target already counted: %v, want 'already counting'", err)
	}
}

// statsOn turns run-time stats on until the test ends.
func statsOn(t *testing.T) {
	t.Helper()
	privtest.LockStats(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enable stats: %v", err)
	}
	t.Cleanup(func() { stats.Close() })
}

// exactCounters skips outside the VM: only there does the kernel allow
// fentry/fexit.
func exactCounters(t *testing.T, cfg ExactConfig) *ExactCounters {
	t.Helper()
	if !vmtest.InVM() {
		t.Skip("needs fentry/fexit: runs in the VM (TestTracingInVM)")
	}
	privtest.Root(t)
	c, err := NewExactCounters(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loadTarget loads a socket filter with BTF that spins iters times.
func loadTarget(tb testing.TB, iters int32) *ebpf.Program {
	tb.Helper()
	prog, err := btfprog.Load(uniqueName("cnt"), asm.Instructions{
		asm.Mov.Imm(asm.R1, iters),
		asm.Sub.Imm(asm.R1, 1).WithSymbol("loop"),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	})
	if err != nil {
		tb.Fatalf("load target: %v", err)
	}
	tb.Cleanup(func() { prog.Close() })
	return prog
}

func startWindow(tb testing.TB, c *ExactCounters, target *ebpf.Program, d time.Duration) *CounterWindow {
	tb.Helper()
	w, err := c.Start(progID(tb, target), d)
	if err != nil {
		tb.Fatalf("start window: %v", err)
	}
	tb.Cleanup(func() { w.Close() })
	return w
}

// waitNoCounterPrograms waits until no counters_entry/counters_exit
// program is loaded: a stopped window leaves nothing attached.
func waitNoCounterPrograms(tb testing.TB) {
	tb.Helper()
	waitNoPrograms(tb, "counters_entry", "counters_exit")
}

// waitNoPrograms waits until no program of these names is loaded.
func waitNoPrograms(tb testing.TB, names ...string) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		samples, err := Sweep(nil)
		if err != nil {
			tb.Fatal(err)
		}
		for _, s := range samples {
			if slices.Contains(names, s.Name) {
				left = append(left, s.Name)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("still loaded 5s after the window stopped: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func openFDs(tb testing.TB) int {
	tb.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(fds)
}
