package counters

import (
	"math"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// windowProfile is a profile as profile.Build makes it, as a literal: value
// type vt, and per program id its (samples, event total).
func windowProfile(vt *pprof.ValueType, period int64, progs map[uint32][2]int64) *pprof.Profile {
	fn := &pprof.Function{ID: 1, Name: "prog"}
	loc := &pprof.Location{ID: 1, Address: 0x10, Line: []pprof.Line{{Function: fn}}}
	p := &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "samples", Unit: "count"}, vt}, DefaultSampleType: vt.Type,
		PeriodType: vt, Period: period, DurationNanos: int64(time.Second),
		Function: []*pprof.Function{fn}, Location: []*pprof.Location{loc},
	}
	for id, v := range progs {
		p.Sample = append(p.Sample, &pprof.Sample{Location: []*pprof.Location{loc}, Value: []int64{v[0], v[1]},
			Label: map[string][]string{profile.LabelProgID: {itoa(id)}}})
	}
	return p
}

func itoa(id uint32) string { return string(rune('0'+id/10)) + string(rune('0'+id%10)) }

func estimates(t *testing.T, ps ...*pprof.Profile) map[perfevent.Event]map[uint32]profile.ProgramEstimate {
	t.Helper()
	out := map[perfevent.Event]map[uint32]profile.ProgramEstimate{}
	for _, p := range ps {
		if err := p.CheckValid(); err != nil {
			t.Fatal(err)
		}
		e, name, err := profile.ProgramEstimates(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range sampledEvents {
			if ev.String() == name || (ev == perfevent.CPUClock && name == "cpu") {
				out[ev] = e
			}
		}
	}
	return out
}

func near(got *float64, want float64) bool {
	return got != nil && math.Abs(*got-want) <= 1e-9*math.Abs(want)
}

// TestSampledCountersCPUClock: 200 cpu-clock samples at 99 Hz in a program
// that ran 10,000 times in the window are 200 × 1e9/99 ns = 2.02 ms, so
// 202 ns per run. A tail-call target (no runs) gets its ns and no per-run
// figure; without a PMU the hardware figures are absent, not zero.
func TestSampledCountersCPUClock(t *testing.T) {
	const period = int64(time.Second) / 99
	cpu := windowProfile(&pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}, period, map[uint32][2]int64{
		11: {200, 200 * period},
		12: {5, 5 * period}, // tail-call target
	})
	start := time.Unix(1000, 0)
	got := sampledCounters(estimates(t, cpu), map[uint32]float64{11: 10_000.4, 13: 500}, start, start.Add(time.Second))
	if len(got) != 2 {
		t.Fatalf("windows for %d programs, want 2 (13 has runs but no sample)", len(got))
	}
	pc := got[11]
	if pc.Mechanism != api.MechanismSampled || pc.CountedRuns != 10_000 || pc.Samples != 200 || pc.Totals["cpu-clock"] != float64(200*period) {
		t.Errorf("prog 11: %+v", pc)
	}
	if !near(pc.CPUClockNsPerRun, float64(200*period)/10_000) {
		t.Errorf("prog 11 ns/run %v, want %v", pc.CPUClockNsPerRun, float64(200*period)/10_000)
	}
	if pc.CyclesPerRun != nil || pc.InstructionsPerRun != nil || pc.IPC != nil || pc.LLCMissesPerRun != nil || pc.LLCMissesPer1kInstructions != nil {
		t.Errorf("prog 11 has hardware figures without a PMU: %+v", pc)
	}
	tail := got[12]
	if tail.CountedRuns != 0 || tail.CPUClockNsPerRun != nil || tail.Totals["cpu-clock"] != float64(5*period) || tail.Samples != 5 {
		t.Errorf("tail-call target: %+v; want its ns and no per-run figure", tail)
	}

	// Stored and read back: the same figures (ns rounded to whole ns).
	back := SampledFromStore(sampledSample(store.InstanceKey{ID: 11}, pc))
	if back.CountedRuns != pc.CountedRuns || back.Samples != 200 || !back.WindowStart.Equal(start) || !near(back.CPUClockNsPerRun, math.Round(float64(200*period))/10_000) {
		t.Errorf("round trip: %+v", back)
	}
}

// TestSampledCountersPMU: where a PMU exists, cycles, instructions and LLC
// misses profiles (frequency mode: each sample has its own period, Build
// sums them) give cycles/run, instructions/run, IPC and LLC misses per run
// and per 1k instructions.
func TestSampledCountersPMU(t *testing.T) {
	const period = int64(time.Second) / 99
	cpu := windowProfile(&pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}, period, map[uint32][2]int64{21: {100, 100 * period}})
	cycles := windowProfile(&pprof.ValueType{Type: "cycles", Unit: "count"}, 0, map[uint32][2]int64{21: {90, 3_000_000_000}})
	insns := windowProfile(&pprof.ValueType{Type: "instructions", Unit: "count"}, 0, map[uint32][2]int64{21: {95, 6_000_000_000}})
	llc := windowProfile(&pprof.ValueType{Type: "llc-misses", Unit: "count"}, 0, map[uint32][2]int64{22: {3, 1000}})
	got := sampledCounters(estimates(t, cpu, cycles, insns, llc), map[uint32]float64{21: 1_000_000}, time.Unix(0, 0), time.Unix(1, 0))
	pc := got[21]
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"cycles/run":    {pc.CyclesPerRun, 3000},
		"insns/run":     {pc.InstructionsPerRun, 6000},
		"ipc":           {pc.IPC, 2},
		"llc/run":       {pc.LLCMissesPerRun, 0}, // sampled, none landed here
		"llc/1k insns":  {pc.LLCMissesPer1kInstructions, 0},
		"cpu-clock/run": {pc.CPUClockNsPerRun, float64(100*period) / 1e6},
	} {
		if c.got == nil || math.Abs(*c.got-c.want) > 1e-9*math.Max(1, c.want) {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if len(pc.Events) != 4 {
		t.Errorf("events %v, want all four", pc.Events)
	}
	// Program 22 had only LLC-miss samples: a window, no runs, no per-run.
	if p := got[22]; p == nil || p.Totals["llc-misses"] != 1000 || p.LLCMissesPerRun != nil || p.Samples != 0 {
		t.Errorf("prog 22: %+v", p)
	}
	s := sampledSample(store.InstanceKey{ID: 21}, pc)
	if s.Present != 0xf || s.Values[1] != 3_000_000_000 || s.Values[2] != 6_000_000_000 || s.Mechanism != store.CounterSampled {
		t.Errorf("stored %+v", s)
	}
	if back := SampledFromStore(s); !near(back.IPC, 2) || !near(back.InstructionsPerRun, 6000) {
		t.Errorf("round trip %+v", back)
	}
}

// TestInterpolateRuns: run_cnt at a window edge comes from the sweeps on
// either side of it.
func TestInterpolateRuns(t *testing.T) {
	t0 := time.Unix(100, 0)
	f := sampler.NewFixture()
	prog := sampler.FixtureProgram{HavePrev: true, PrevAt: t0, CurAt: t0.Add(time.Second)}
	prog.Prev.RunCnt, prog.Cur.RunCnt = 1000, 2000
	p := f.Put(prog)
	if v, ok := interpolateRuns(p, t0.Add(250*time.Millisecond)); !ok || v != 1250 {
		t.Errorf("between sweeps: %v %v, want 1250", v, ok)
	}
	if v, ok := interpolateRuns(p, t0.Add(2*time.Second)); !ok || v != 2000 {
		t.Errorf("after the last sweep: %v %v, want 2000", v, ok)
	}
	if _, ok := interpolateRuns(p, t0.Add(-time.Second)); ok {
		t.Error("before both sweeps: want unknown")
	}
	prog.Meta.LoadedAt = t0.Add(-2 * time.Second)
	p = f.Put(prog)
	if v, ok := interpolateRuns(p, t0.Add(-time.Second)); ok {
		t.Errorf("loaded before t, count unknown: %v", v)
	}
	prog.Meta.LoadedAt = t0.Add(time.Millisecond)
	prog.HavePrev = false
	p = f.Put(prog)
	if v, ok := interpolateRuns(p, t0); !ok || v != 0 {
		t.Errorf("loaded after t: %v %v, want 0", v, ok)
	}
}
