package api

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

func TestRatesBetween(t *testing.T) {
	a := Counters{RunTimeNs: 1_000, RunCnt: 10}
	b := Counters{RunTimeNs: 501_000, RunCnt: 1_010}
	r := RatesBetween(a, b, 2*time.Second)
	if *r.RunsPerSec != 500 || *r.AvgNsPerRun != 500 || *r.CPUPercent != 0.025 {
		t.Errorf("rates = %v/s %v ns %v%%", *r.RunsPerSec, *r.AvgNsPerRun, *r.CPUPercent)
	}

	idle := RatesBetween(b, b, time.Second)
	if *idle.RunsPerSec != 0 || idle.AvgNsPerRun != nil || *idle.CPUPercent != 0 {
		t.Errorf("idle: %+v, want 0 runs/s, no avg, 0%% CPU", idle)
	}
	for name, r := range map[string]Rates{
		"no time":   RatesBetween(a, b, 0),
		"backwards": RatesBetween(b, a, time.Second),
	} {
		if r.RunsPerSec != nil || r.AvgNsPerRun != nil || r.CPUPercent != nil {
			t.Errorf("%s: %+v, want no rates", name, r)
		}
	}
	if Optional(Counters{}.AvgNsSinceLoad()) != nil || *Optional(b.AvgNsSinceLoad()) != 501_000.0/1_010 {
		t.Error("AvgNsSinceLoad wrong")
	}
}

// TestGuards: every quotient is absent, not zero or infinite, when its
// divisor is zero or negative.
func TestGuards(t *testing.T) {
	type result struct {
		v  float64
		ok bool
	}
	of := func(v float64, ok bool) result { return result{v, ok} }
	none := result{}
	for name, c := range map[string]struct{ got, want result }{
		"per second":          {of(PerSecond(10, 2*time.Second)), result{5, true}},
		"per second, no time": {of(PerSecond(10, 0)), none},
		"per second, back":    {of(PerSecond(10, -time.Second)), none},
		"per run":             {of(PerRun(600, 3)), result{200, true}},
		"per run, no run":     {of(PerRun(600, 0)), none},
		"cpu %":               {of(CPUPercent(5e8, time.Second)), result{50, true}},
		"cpu %, no time":      {of(CPUPercent(5e8, 0)), none},
		"ratio":               {of(Ratio(3, 2)), result{1.5, true}},
		"ratio, zero":         {of(Ratio(3, 0)), none},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	d, ok := DeltaBetween(Counters{RunTimeNs: 100, RunCnt: 1}, Counters{RunTimeNs: 1100, RunCnt: 11}, time.Millisecond)
	if !ok || d.Runs != 10 || d.Ns != 1000 {
		t.Fatalf("delta %+v %v", d, ok)
	}
	for name, c := range map[string]struct{ got, want result }{
		"runs/s":     {of(d.RunsPerSec()), result{10_000, true}},
		"avg ns":     {of(d.AvgNsPerRun()), result{100, true}},
		"cpu %":      {of(d.CPUPercent()), result{0.1, true}},
		"idle avg":   {of(Delta{Elapsed: time.Second}.AvgNsPerRun()), none},
		"since load": {of(Counters{}.AvgNsSinceLoad()), none},
	} {
		if c.got != c.want {
			t.Errorf("delta %s = %v, want %v", name, c.got, c.want)
		}
	}
}

// TestPerfPerRun: per-run figures divide by the counted runs, IPC and
// misses per 1k instructions need their divisor, an event not counted
// stays absent, and nothing is derived without a counted run.
func TestPerfPerRun(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	totals := make([]*float64, 4)
	totals[perfevent.CPUClock] = f(2_000_000)
	totals[perfevent.Cycles] = f(3_000_000)
	totals[perfevent.Instructions] = f(6_000_000)
	pc := PerfPerRun(1000, totals)
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"ns/run":     {pc.CPUClockNsPerRun, 2000},
		"cycles/run": {pc.CyclesPerRun, 3000},
		"insns/run":  {pc.InstructionsPerRun, 6000},
		"ipc":        {pc.IPC, 2},
	} {
		if c.got == nil || *c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if pc.LLCMissesPerRun != nil || pc.LLCMissesPer1kInstructions != nil || pc.CountedRuns != 1000 {
		t.Errorf("LLC misses were not counted: %+v", pc)
	}
	totals[perfevent.LLCMisses] = f(1500)
	if pc := PerfPerRun(1000, totals); pc.LLCMissesPer1kInstructions == nil || *pc.LLCMissesPer1kInstructions != 0.25 {
		t.Errorf("llc/1k insns = %v, want 0.25", pc.LLCMissesPer1kInstructions)
	}
	totals[perfevent.Cycles], totals[perfevent.Instructions] = f(0), f(0)
	if pc := PerfPerRun(1000, totals); pc.IPC != nil || pc.LLCMissesPer1kInstructions != nil {
		t.Errorf("no cycles or instructions: IPC %v, llc/1k %v; want absent", pc.IPC, pc.LLCMissesPer1kInstructions)
	}
	if pc := PerfPerRun(0, totals); pc.CPUClockNsPerRun != nil || pc.IPC != nil || pc.LLCMissesPerRun != nil {
		t.Errorf("no counted run: %+v, want nothing per run", pc)
	}
	if pc := PerfPerRun(10, totals[:1]); pc.CPUClockNsPerRun == nil || pc.CyclesPerRun != nil {
		t.Errorf("short totals: %+v", pc)
	}
}
