package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
	"github.com/cilium/ebpf"
)

// runSuite runs the built-in tests matching filter with short measurements
// and fails on any test failure.
func runSuite(t *testing.T, filter string, measures int, target time.Duration) map[string]Result {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(filter)
	cfg.Measures, cfg.Target = measures, target
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Result{}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
		out[r.Name] = r
	}
	return out
}

// The chain runs to the depth asked for (each test checks the return value
// of the last program, which is its depth), the kernel stops at 33 tail
// calls, and the cost grows with the chain.
func TestTailCalls(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t) // timings shift by ~45-65 ns when another test turns stats on
	// Every run checks the depth exactly; the timing order gets three
	// tries, because other processes share this machine's two CPUs.
	eventually(t, 3, func() error {
		res := runSuite(t, `^tailcall/`, 5, time.Millisecond)
		if len(res) != MaxTailCalls+2 {
			t.Fatalf("%d tail-call results, want %d", len(res), MaxTailCalls+2)
		}
		med := func(n string) float64 { return res["tailcall/chain="+n].Summary.Median }
		if !(med("0") < med("16") && med("16") < med("33")) {
			return fmt.Errorf("cost does not grow with the chain: 0: %.1f, 16: %.1f, 33: %.1f ns", med("0"), med("16"), med("33"))
		}
		return nil
	})

	// The limit, directly: with every slot filled the chain stops at 33.
	spec, err := loadTailcall()
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	for _, tc := range []struct{ slots, depth int }{{0, 0}, {1, 1}, {33, 33}, {34, 33}, {tailSlots, 33}} {
		if err := fillChain(coll, tc.slots); err != nil {
			t.Fatal(err)
		}
		ret, _, err := testRun(coll.Programs["tail_entry"], defaultInput(ebpf.SocketFilter), 1)
		if err != nil {
			t.Fatal(err)
		}
		if int(ret) != tc.depth {
			t.Errorf("%d slots filled: chain of %d tail calls, want %d", tc.slots, ret, tc.depth)
		}
	}
}

// Hash lookups cost more than array lookups, and results carry the
// fingerprint.
func TestHashCostsMoreThanArray(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t) // timings shift by ~45-65 ns when another test turns stats on
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^maps/(array|hash)/lookup/size=1K/keys=uniform$`)
	cfg.Measures = 15
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Failed() {
		t.Fatalf("results: %+v", rep.Results)
	}
	array, hash := rep.Results[0].Summary.Median, rep.Results[1].Summary.Median
	if !(hash > array) {
		t.Fatalf("hash lookup %.1f ns, array lookup %.1f ns: hash should cost more", hash, array)
	}
	fp := rep.Fingerprint
	if fp.Kernel == "" || fp.CPUs < 1 || fp.CPUModel == "" || fp.JIT["bpf_jit_enable"] == "" || len(fp.Vulnerabilities) == 0 || fp.Stats.Source == "" {
		t.Fatalf("fingerprint incomplete: %+v", fp)
	}
}

// Every test of the quick suite runs and returns what it should.
func TestQuickSuite(t *testing.T) {
	privtest.Root(t)
	cfg := DefaultConfig()
	cfg.Quick, cfg.Target, cfg.Measures = true, 200*time.Microsecond, 3
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
		if r.Skipped != "" {
			skipped++
		}
	}
	// lwt_seg6local, raw_tracepoint and syscall have no timed test run.
	if skipped != 3 {
		t.Errorf("%d tests skipped, want 3", skipped)
	}
}

// A ring buffer test asked for more runs than the ring holds is capped and
// drained, so it never measures the "ring full" path (which returns 1).
func TestRingbufDrained(t *testing.T) {
	privtest.Root(t)
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^ringbuf/output/bytes=4096$`)
	cfg.Repeat, cfg.Measures = 1_000_000, 3
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Error != "" || r.Repeat >= 1_000_000 || r.Repeat < 1000 {
		t.Fatalf("ring buffer: repeat %d, error %q", r.Repeat, r.Error)
	}
}

func TestParallel(t *testing.T) {
	privtest.Root(t)
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^baseline/socket_filter$`)
	cfg.CPUs, cfg.Measures, cfg.Target = []int{0, 1}, 4, time.Millisecond
	if err := cfg.Validate(); err != nil {
		privtest.Skip(t, "needs two CPUs: "+err.Error())
	}
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if len(r.Runs) != 2 || r.Runs[0].CPU != 0 || r.Runs[1].CPU != 1 || r.Summary.N != 8 {
		t.Fatalf("parallel runs: %+v", r.Runs)
	}
}

// Stats are reported as they were: on with --with-stats, and otherwise
// whatever the probe sees (another holder may have them on).
func TestStatsReported(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^baseline/socket_filter$`)
	cfg.Measures, cfg.Target = 2, time.Millisecond
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{WithStats: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Fingerprint.Stats; !s.Counting || s.Source != "--with-stats" {
		t.Fatalf("with stats: %+v", s)
	}
	before, err := privtest.StatsCounting()
	if err != nil {
		t.Fatal(err)
	}
	rep, err = Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := privtest.StatsCounting()
	if before == after && rep.Fingerprint.Stats.Counting != before {
		t.Fatalf("stats counting %v around the run, report says %+v", before, rep.Fingerprint.Stats)
	}
}

// eventually retries check up to n times and fails with the last error:
// for timing orders only, never for exact results.
func eventually(t *testing.T, n int, check func() error) {
	t.Helper()
	var err error
	for i := 0; i < n; i++ {
		if err = check(); err == nil {
			return
		}
		t.Logf("try %d: %v", i+1, err)
	}
	t.Fatal(err)
}

// progTest benchmarks an already loaded program.
func progTest(name string, p *ebpf.Program) Test {
	return Test{Name: name, Entry: name, prepare: func(any) (*Case, error) {
		return &Case{Program: p, Input: defaultInput(ebpf.SocketFilter), Want: want(0)}, nil
	}}
}

// Compare flags a planted 2x slowdown as significant and a rerun of the
// same program as not.
func TestCompareRealRuns(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t) // timings shift by ~45-65 ns when another test turns stats on
	fast, err := privtest.LoadLoop("bench_fast", 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	slow, err := privtest.LoadLoop("bench_slow", 4000)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	cfg := DefaultConfig()
	cfg.Measures, cfg.Target = 10, 2*time.Millisecond
	run := func(p *ebpf.Program) Samples {
		rep, err := Run(context.Background(), []Test{progTest("loop", p)}, cfg, Options{})
		if err != nil || rep.Failed() {
			t.Fatalf("run: %v %+v", err, rep.Results)
		}
		return SamplesOf(rep)
	}
	eventually(t, 3, func() error {
		base, rerun, slower := run(fast), run(fast), run(slow)
		d := Compare(base, slower).Deltas[0]
		if !d.Significant || d.Pct < 60 {
			return fmt.Errorf("2x slowdown: %+v", d)
		}
		if regs := Compare(base, slower).Regressions(25); len(regs) != 1 {
			return fmt.Errorf("2x slowdown not a regression over 25%%")
		}
		d = Compare(base, rerun).Deltas[0]
		if d.Significant {
			return fmt.Errorf("rerun of the same program: %+v", d)
		}
		t.Logf("rerun: %+.2f%% p=%.3f significant=%v", d.Pct, d.P, d.Significant)
		return nil
	})
}

// A user object runs with map-init: hash_lookup returns 0 only when the key
// (0) was inserted, so the return value proves the map was filled.
func TestObjectWithMapInit(t *testing.T) {
	privtest.Root(t)
	dir := t.TempDir()
	init := filepath.Join(dir, "init.yaml")
	os.WriteFile(init, []byte("maps:\n  hash:\n    - key: 0\n      value: 42\n"), 0o600)
	cfg := DefaultConfig()
	cfg.Measures, cfg.Target = 2, time.Millisecond
	for _, tc := range []struct {
		init string
		ret  uint32
	}{{"", 1}, {init, 0}} {
		test, err := ObjectTest(Object{Path: "maps_bpfel.o", Program: "hash_lookup", MapInit: tc.init, Want: want(tc.ret)})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), []Test{test}, cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r := rep.Results[0]; r.Error != "" || r.Summary.N != 2 {
			t.Fatalf("map-init %q: %+v", tc.init, r)
		}
	}
}

// TestCountersAroundTestRuns: events counted per run around each test-run
// call agree with the kernel's own timing (cpu-clock, which every host has,
// stands in for cycles here), and are net of the empty program of the same
// hook when it ran too.
func TestCountersAroundTestRuns(t *testing.T) {
	privtest.Root(t)
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^(baseline/socket_filter|helpers/ktime_get_ns)$`)
	cfg.Measures, cfg.Target = 10, 2*time.Millisecond
	cfg.Events = []perfevent.Event{perfevent.CPUClock}
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || len(rep.Config.Events) != 1 {
		t.Fatalf("results %d, events %v", len(rep.Results), rep.Config.Events)
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Fatalf("%s: %s", r.Name, r.Error)
		}
		clock, ok := r.Events["cpu-clock"]
		if !ok || clock.N != 10 || len(r.EventMeasurements("cpu-clock")) != 10 {
			t.Fatalf("%s: events %+v", r.Name, r.Events)
		}
		// The kernel's mean per run covers its loop, as the counters do;
		// they add the system call, spread over thousands of runs.
		ratio := clock.Median / r.Summary.Median
		t.Logf("%s: kernel %.1f ns/run, cpu-clock counted %.1f ns/run (net %.1f)", r.Name, r.Summary.Median, clock.Median, r.EventsNet["cpu-clock"])
		if ratio < 0.8 || ratio > 1.3 {
			t.Errorf("%s: cpu-clock counted %.1f ns/run against the kernel's %.1f", r.Name, clock.Median, r.Summary.Median)
		}
		if _, ok := r.EventsNet["cpu-clock"]; !ok {
			t.Errorf("%s: no net figure, though baseline/socket_filter ran", r.Name)
		}
	}
	if net := rep.Results[1].EventsNet["cpu-clock"]; net <= 0 {
		t.Errorf("ktime_get_ns net of the empty program: %.1f ns, want more than 0", net)
	}
}

// TestCountersHardwareNoPMU: where there is no PMU, asking for hardware
// events fails naming the missing PMU.
func TestCountersHardwareNoPMU(t *testing.T) {
	privtest.Root(t)
	if privtest.NoPMU(t) == "" {
		t.Skip("this machine has a PMU: TestCountersHardware counts")
	}
	_, _, err := ProbeEvents([]perfevent.Event{perfevent.Cycles, perfevent.Instructions, perfevent.LLCMisses})
	if !errors.Is(err, perfevent.ErrNoPMU) || !strings.Contains(fmt.Sprint(err), "no hardware PMU (ENOENT)") {
		t.Errorf("ProbeEvents without a PMU: %v, want ErrNoPMU, 'no hardware PMU (ENOENT)'", err)
	}
}

// TestCountersHardware: where a PMU exists, cycles, instructions and LLC
// misses are each counted per run (more than 0) and IPC is sane; an event
// the PMU does not count (llc-misses in the arm64 VM, TestPMUInVM) is
// named in the report as not supported and has no figure. Under icount
// (the arm64 VM's exact mode) IPC is exactly 1 / 2^shift. Skipped through
// privtest.PMU where there is no PMU.
func TestCountersHardware(t *testing.T) {
	privtest.Root(t)
	privtest.PMU(t)
	hw := []perfevent.Event{perfevent.Cycles, perfevent.Instructions, perfevent.LLCMisses}
	counted, unsupported, err := ProbeEvents(hw)
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range unsupported {
		if !errors.Is(err, perfevent.ErrEventNotSupported) || e == perfevent.Cycles {
			t.Errorf("%v: %v; only an event other than cycles may be not supported by this PMU", e, err)
		}
	}
	if len(counted)+len(unsupported) != len(hw) {
		t.Fatalf("probe: counted %v, unsupported %v of %v", counted, unsupported, hw)
	}
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^baseline/socket_filter$`)
	cfg.Measures, cfg.Target, cfg.Events, cfg.Unsupported = 5, 2*time.Millisecond, counted, unsupported
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{})
	if err != nil || rep.Results[0].Error != "" {
		t.Fatal(err, rep.Results[0].Error)
	}
	r := rep.Results[0]
	for _, e := range hw {
		_, counted := r.Events[e.String()]
		why := rep.Config.Unsupported[e.String()]
		switch {
		case unsupported[e] != nil && (counted || why != "not supported by this PMU (ENOENT)"):
			t.Errorf("%v: figure %v, report says %q; want no figure, not supported by this PMU (ENOENT)", e, counted, why)
		case unsupported[e] == nil && r.Events[e.String()].Median <= 0:
			t.Errorf("%v per run: %+v, want more than 0", e, r.Events[e.String()])
		}
	}
	ipc, ok := r.IPC()
	t.Logf("events %+v, IPC %v, not supported %v", r.Events, ipc, rep.Config.Unsupported)
	if !ok || ipc < 1.0/8 || ipc > 8 {
		t.Errorf("events %+v, IPC %v, want 1/8..8", r.Events, ipc)
	}
	if shift, exact := vmtest.ICount(); exact && math.Abs(ipc*float64(uint64(1)<<shift)-1) > 0.01 {
		t.Errorf("IPC %v under icount shift %d, want 1/%d within 1%%", ipc, shift, 1<<shift)
	}
}

// TestPMUInVM runs the tests that need a PMU in the arm64 VM under icount
// (QEMU's emulated PMUv3, exact instruction counts).
func TestPMUInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{Arch: vmtest.ARM64, Exact: true}, []string{"TestCountersHardware", "TestCountersLoopJITPath"})
}

// loopTest benchmarks a loop of turns turns (privtest.LoadLoop), a socket
// filter like the suite's baseline one.
func loopTest(turns int) Test {
	return Test{
		Name:  fmt.Sprintf("loop/turns=%d", turns),
		Group: "loop",
		Entry: "loop",
		prepare: func(any) (*Case, error) {
			p, err := privtest.LoadLoop("bench_loop", int32(turns))
			if err != nil {
				return nil, err
			}
			return &Case{Program: p, Input: defaultInput(ebpf.SocketFilter), Want: want(0), close: func() { p.Close() }}, nil
		},
	}
}

// TestCountersLoopJITPath: under icount (the arm64 VM's exact mode,
// TestPMUInVM), bench --counters counts the instructions each run of a
// loop program executes: per run, the median equals the loop's path
// through its arm64 JIT image within 1%, for two loop lengths (the
// test-run harness adds its few instructions a run: EventsNet, less the
// empty program's, is logged), and the two lengths' difference is body ×
// the turns between them within 1%.
func TestCountersLoopJITPath(t *testing.T) {
	if _, exact := vmtest.ICount(); !exact {
		t.Skip("needs exact instruction counts: runs in the arm64 VM under icount (TestPMUInVM)")
	}
	privtest.Root(t)
	turnsOf := [2]int{10_000, 20_000}
	tests := []Test{}
	for _, s := range Suite() {
		if s.Name == "baseline/socket_filter" {
			tests = append(tests, s)
		}
	}
	for _, n := range turnsOf {
		tests = append(tests, loopTest(n))
	}
	cfg := DefaultConfig()
	// 1,000 runs a measurement: what lands on the thread once a
	// measurement (about 20,000 instructions here, seen with the 100 runs
	// a 2 ms target picks) is then 20 a run.
	cfg.Measures, cfg.Repeat, cfg.Events = 5, 1000, []perfevent.Event{perfevent.Instructions}
	rep, err := Run(context.Background(), tests, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var perRun [2]float64
	var bodies [2]int
	for i, n := range turnsOf {
		r := rep.Results[1+i]
		if r.Error != "" || r.Skipped != "" {
			t.Fatalf("%s: %s%s", r.Name, r.Error, r.Skipped)
		}
		prog, err := privtest.LoadLoop("bench_loop", int32(n))
		if err != nil {
			t.Fatal(err)
		}
		path, body, err := privtest.JitedPathARM64(prog, n)
		prog.Close()
		if err != nil {
			t.Fatal(err)
		}
		insns := r.Events[perfevent.Instructions.String()]
		perRun[i], bodies[i] = insns.Median, body
		t.Logf("%s: %.0f instructions/run (median of %d measurements of %d runs), net of the harness %.0f; JIT path %d (body %d): %+.3f%%",
			r.Name, insns.Median, cfg.Measures, r.Repeat, r.EventsNet[perfevent.Instructions.String()], path, body, 100*(insns.Median/float64(path)-1))
		if math.Abs(insns.Median/float64(path)-1) > 0.01 {
			t.Errorf("%s: %.0f instructions per run, want within 1%% of the JIT path's %d", r.Name, insns.Median, path)
		}
	}
	want := float64(bodies[0] * (turnsOf[1] - turnsOf[0]))
	if diff := perRun[1] - perRun[0]; bodies[0] != bodies[1] || math.Abs(diff/want-1) > 0.01 {
		t.Errorf("the longer loop counted %.0f more instructions per run, want body %d x %d turns = %.0f within 1%%", diff, bodies[0], turnsOf[1]-turnsOf[0], want)
	}
}
