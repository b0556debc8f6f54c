package collectors

import (
	"errors"
	"math"
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

// Tests that need a real PMU driver with exact counts run in the arm64
// VM under icount (vmtest.Config.Exact), where QEMU's emulated PMUv3
// counts every instruction retired and its cycle counter is the icount
// clock; TestCountersPMUInVM boots it. Elsewhere they skip.

// TestCountersPMUInVM runs the PMU tests in the arm64 exact VM on
// Debian's 6.1 and 6.12.
func TestCountersPMUInVM(t *testing.T) {
	for _, s := range []*vmtest.Series{vmtest.Kernel61, vmtest.Kernel612} {
		t.Run(s.Name, func(t *testing.T) {
			vmtest.RunTests(t, vmtest.Config{Arch: vmtest.ARM64, Exact: true, Series: s}, []string{
				"TestProbeCounters", "TestCountersExactInstructionsPerRun", "TestCountersExactEventNotSupported", "TestLatencyCyclesPerRun",
				"TestCountersExactMultiplexed", "TestLatencyInstructionsPerRun", "TestLatencyMultiplexed",
			})
		})
	}
}

// exactPMU skips outside the exact VM and returns its icount shift.
func exactPMU(t *testing.T) int {
	t.Helper()
	shift, ok := vmtest.ICount()
	if !ok {
		t.Skip("needs exact PMU counts: runs in the arm64 VM under icount (TestCountersPMUInVM)")
	}
	privtest.Root(t)
	return shift
}

// The exact counters' instructions per run of a loop program equal the
// instructions its run executes in its JIT image (the oracle: the image
// disassembled, body × turns + the rest of its path), within 1%, for two
// loop lengths; what is left over is the trampoline and the counter
// reads inside the counted interval (about 3,000 instructions, so the
// loops are long: 0.3% of 1,000,000; see loadWideLoop). The two loops' difference per
// run, where that fixed part cancels, is body × the turns between them
// within 1% (timer interrupts land on some runs). Cycles are
// instructions << shift: under icount the cycle counter is the clock
// icount drives.
func TestCountersExactInstructionsPerRun(t *testing.T) {
	shift := exactPMU(t)
	c := exactCounters(t, ExactConfig{Events: []perfevent.Event{perfevent.Instructions, perfevent.Cycles}, MaxTargets: 2})
	const runs = 20
	var perRun [2]float64
	var bodies [2]int
	turnsOf := [2]int{15_000, 30_000}
	for i, turns := range turnsOf {
		r, path, body := countWideLoop(t, c, turns, runs)
		if r.Counted != runs {
			t.Fatalf("%d of %d runs counted", r.Counted, runs)
		}
		insns, okI := r.PerRun(perfevent.Instructions)
		cycles, okC := r.PerRun(perfevent.Cycles)
		if !okI || !okC {
			t.Fatalf("reading %+v: instructions or cycles absent", r)
		}
		perRun[i], bodies[i] = insns, body
		t.Logf("%d turns: %.0f instructions/run, JIT path %d (body %d): %+.0f (%+.3f%%); %.0f cycles/run",
			turns, insns, path, body, insns-float64(path), 100*(insns/float64(path)-1), cycles)
		if math.Abs(insns/float64(path)-1) > 0.01 {
			t.Errorf("%d turns: %.0f instructions per run, want within 1%% of the JIT path's %d", turns, insns, path)
		}
		if want := insns * float64(uint64(1)<<shift); math.Abs(cycles/want-1) > 0.01 {
			t.Errorf("%d turns: %.0f cycles per run, want instructions << %d = %.0f within 1%%", turns, cycles, shift, want)
		}
	}
	want := float64(bodies[0] * (turnsOf[1] - turnsOf[0]))
	diff := perRun[1] - perRun[0]
	t.Logf("per-run difference of the two: %.0f instructions, JIT body × %d turns %.0f", diff, turnsOf[1]-turnsOf[0], want)
	if bodies[0] != bodies[1] || math.Abs(diff/want-1) > 0.01 {
		t.Errorf("the longer loop counted %.0f more instructions per run, want %.0f (bodies %v) within 1%%", diff, want, bodies)
	}
}

// countWideLoop counts runs runs of a wide loop of turns turns
// (loadWideLoop) in a window of c, and returns the reading with the loop's
// executed path and body in its JIT image.
func countWideLoop(t *testing.T, c *ExactCounters, turns, runs int) (r CounterReading, path, body int) {
	t.Helper()
	target := loadWideLoop(t, int32(turns))
	path, body, err := privtest.JitedPathARM64(target, turns)
	if err != nil {
		t.Fatal(err)
	}
	w := startWindow(t, c, target, time.Minute)
	if err := privtest.Run(target, runs); err != nil {
		t.Fatal(err)
	}
	if r, err = w.Read(); err != nil {
		t.Fatal(err)
	}
	return r, path, body
}

// loadWideLoop loads a program with BTF that turns a loop of 16 64-bit
// immediate loads (four arm64 instructions each) turns times. The
// verifier walks a bounded loop turn by turn, comparing states at its
// head: 600,000 turns of loadTarget's three-instruction loop did not load
// within two minutes on 6.12 under icount, so the instructions come from
// a wide body rather than from many turns.
func loadWideLoop(tb testing.TB, turns int32) *ebpf.Program {
	tb.Helper()
	insns := asm.Instructions{asm.Mov.Imm(asm.R1, turns)}
	for i := range 16 {
		// Four distinct non-zero halfwords: a movz and three movk.
		insn := asm.LoadImm(asm.R2, int64(0x1234_5678_9abc_0def+uint64(i)<<20), asm.DWord)
		if i == 0 {
			insn = insn.WithSymbol("loop")
		}
		insns = append(insns, insn)
	}
	insns = append(insns,
		asm.Sub.Imm(asm.R1, 1),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	)
	prog, err := btfprog.Load(uniqueName("wide"), insns)
	if err != nil {
		tb.Fatalf("load target: %v", err)
	}
	tb.Cleanup(func() { prog.Close() })
	return prog
}

// Where the PMU does not count an event (QEMU's has no cache events:
// llc-misses gives ENOENT while cycles open), a window asked for it
// counts the others and reads it as not supported by this PMU, absent
// rather than 0; the probe says the same of it.
func TestCountersExactEventNotSupported(t *testing.T) {
	shift := exactPMU(t)
	if err := ProbeCounters().EventErrors[perfevent.LLCMisses]; !errors.Is(err, perfevent.ErrEventNotSupported) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("probe: llc-misses %v, want not supported by this PMU (ENOENT)", err)
	}
	c := exactCounters(t, ExactConfig{Events: []perfevent.Event{perfevent.LLCMisses, perfevent.Instructions, perfevent.Cycles}})
	const turns, runs = 15_000, 10
	r, path, _ := countWideLoop(t, c, turns, runs)
	if len(r.Values) != 3 || r.Values[0].Event != perfevent.LLCMisses {
		t.Fatalf("values %+v: want llc-misses, instructions, cycles", r.Values)
	}
	llc := r.Values[0]
	var oe *perfevent.OpenError
	if !errors.As(llc.Err, &oe) || oe.Summary() != "not supported by this PMU (ENOENT)" {
		t.Errorf("llc-misses: %v, want an *OpenError saying not supported by this PMU (ENOENT)", llc.Err)
	}
	if n, ok := r.PerRun(perfevent.LLCMisses); ok || llc.Counter != 0 {
		t.Errorf("llc-misses per run %v, %v (counter %d): want absent", n, ok, llc.Counter)
	}
	insns, okI := r.PerRun(perfevent.Instructions)
	cycles, okC := r.PerRun(perfevent.Cycles)
	t.Logf("llc-misses: %v; %d of %d runs counted: %.0f instructions/run (JIT path %d), %.0f cycles/run", llc.Err, r.Counted, runs, insns, path, cycles)
	if r.Counted != runs || !okI || !okC {
		t.Fatalf("%d of %d runs counted; instructions %v, cycles %v", r.Counted, runs, okI, okC)
	}
	if math.Abs(insns/float64(path)-1) > 0.01 {
		t.Errorf("%.0f instructions per run beside an unsupported event, want within 1%% of the JIT path's %d", insns, path)
	}
	if want := insns * float64(uint64(1)<<shift); math.Abs(cycles/want-1) > 0.01 {
		t.Errorf("%.0f cycles per run, want instructions << %d = %.0f within 1%%", cycles, shift, want)
	}
}

// TestCountersExactMultiplexed: exact counters on a crowded PMU (8 more
// instruction events open on the CPU, flexible: 9 on QEMU's 6 event
// counters) count every run, their instructions multiplexed (running
// less than enabled), and the figure scaled by enabled / running per run
// is the loop's JIT path within 5%: a run the event was off the PMU for
// adds its enabled time and no count, which the scaling makes up.
func TestCountersExactMultiplexed(t *testing.T) {
	exactPMU(t)
	c := exactCounters(t, ExactConfig{Events: []perfevent.Event{perfevent.Instructions}})
	crowd := crowdPMU(t, 8)
	const turns, runs = 15_000, 100
	r, path, _ := countWideLoop(t, c, turns, runs)
	cc, err := crowd[0].ReadCount()
	if err != nil {
		t.Fatal(err)
	}
	v := r.Values[0]
	insns, ok := r.PerRun(perfevent.Instructions)
	t.Logf("one of the 8 crowding events on the PMU %.0f%%; %d of %d runs counted; instructions on the PMU %.1f%% of %d ns enabled: %d counted, %.0f a run scaled, JIT path %d: %+.2f%%",
		100*float64(cc.Running)/float64(cc.Enabled), r.Counted, runs, 100*float64(v.Running)/float64(v.Enabled), v.Enabled, v.Counter, insns, path, 100*(insns/float64(path)-1))
	if r.Counted != runs || !ok {
		t.Fatalf("%d of %d runs counted, instructions %v", r.Counted, runs, ok)
	}
	if v.Running == 0 || v.Running >= v.Enabled {
		t.Errorf("instructions ran %d of %d ns enabled: want multiplexed", v.Running, v.Enabled)
	}
	if math.Abs(insns/float64(path)-1) > 0.05 {
		t.Errorf("%.0f instructions per run scaled, want within 5%% of the JIT path's %d", insns, path)
	}
}
