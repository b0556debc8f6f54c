package api

import (
	"time"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// The rate and per-run maths, in one place: the daemon fills the API's
// rates and perf counter figures with it, and `bpfperf top` derives its
// own rates from two readings with it. Every function guards its divisor
// and says with ok (or a nil) when a number cannot be had, which is
// absent, not zero.

// Counters are the cumulative bpf_stats of a program at one moment.
type Counters struct {
	RunTimeNs       uint64 `json:"run_time_ns"`
	RunCnt          uint64 `json:"run_cnt"`
	RecursionMisses uint64 `json:"recursion_misses"`
}

// Rates derived from two cumulative readings of one program. A nil field is
// a number that cannot be had (no earlier reading, no runs, no time passed):
// it is absent, not zero.
type Rates struct {
	RunsPerSec  *float64 `json:"runs_per_sec,omitempty"`
	AvgNsPerRun *float64 `json:"avg_ns_per_run,omitempty"`
	// CPUPercent is run time over wall time, relative to one CPU (like
	// bpftop): 100 means one CPU's worth of time spent in the program.
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
}

// PerSecond is n over elapsed wall time; ok is false when no time passed.
func PerSecond(n float64, elapsed time.Duration) (float64, bool) {
	if elapsed <= 0 {
		return 0, false
	}
	return n / elapsed.Seconds(), true
}

// PerRun is total over runs (avg ns/run, cycles/run, ...); ok is false
// without a run.
func PerRun(total, runs float64) (float64, bool) {
	if runs <= 0 {
		return 0, false
	}
	return total / runs, true
}

// CPUPercent is ns of CPU time over elapsed wall time, relative to one
// CPU: 100 is one CPU's worth. ok is false when no time passed.
func CPUPercent(ns float64, elapsed time.Duration) (float64, bool) {
	if elapsed <= 0 {
		return 0, false
	}
	return ns / float64(elapsed.Nanoseconds()) * 100, true
}

// Ratio is a over b (instructions per cycle, LLC misses per instruction);
// ok is false when b is not positive.
func Ratio(a, b float64) (float64, bool) {
	if b <= 0 {
		return 0, false
	}
	return a / b, true
}

// Delta is what a program did between two cumulative readings.
type Delta struct {
	Runs    float64       // runs between the readings
	Ns      float64       // run time between the readings
	Elapsed time.Duration // wall time between the readings
}

// DeltaBetween is what happened from reading a to reading b, taken elapsed
// apart. ok is false when no time passed or counters went backwards (a
// different instance, or a reset).
func DeltaBetween(a, b Counters, elapsed time.Duration) (Delta, bool) {
	if elapsed <= 0 || b.RunCnt < a.RunCnt || b.RunTimeNs < a.RunTimeNs {
		return Delta{}, false
	}
	return Delta{Runs: float64(b.RunCnt - a.RunCnt), Ns: float64(b.RunTimeNs - a.RunTimeNs), Elapsed: elapsed}, true
}

// RunsPerSec is runs per second of wall time.
func (d Delta) RunsPerSec() (float64, bool) { return PerSecond(d.Runs, d.Elapsed) }

// AvgNsPerRun is the mean run time; ok is false when nothing ran.
func (d Delta) AvgNsPerRun() (float64, bool) { return PerRun(d.Ns, d.Runs) }

// CPUPercent is run time over wall time, relative to one CPU (like
// bpftop).
func (d Delta) CPUPercent() (float64, bool) { return CPUPercent(d.Ns, d.Elapsed) }

// RatesBetween is the Rates from reading a to reading b, taken elapsed
// apart: all absent when DeltaBetween has no delta, the average absent
// when nothing ran.
func RatesBetween(a, b Counters, elapsed time.Duration) Rates {
	d, ok := DeltaBetween(a, b, elapsed)
	if !ok {
		return Rates{}
	}
	return Rates{RunsPerSec: Optional(d.RunsPerSec()), AvgNsPerRun: Optional(d.AvgNsPerRun()), CPUPercent: Optional(d.CPUPercent())}
}

// AvgNsSinceLoad is the mean run time over the program's whole life; ok
// is false before its first run.
func (c Counters) AvgNsSinceLoad() (float64, bool) {
	return PerRun(float64(c.RunTimeNs), float64(c.RunCnt))
}

// PerfPerRun derives the per-run figures of one counting window from each
// event's total in it (indexed by perfevent.Event; nil where the event was
// not counted) and the runs the totals cover. Every figure is absent
// without a counted run. The caller fills in the mechanism, the events and
// the window.
func PerfPerRun(counted uint64, totals []*float64) *PerfCounters {
	pc := &PerfCounters{CountedRuns: counted}
	total := func(e perfevent.Event) *float64 {
		if int(e) < len(totals) {
			return totals[e]
		}
		return nil
	}
	if counted == 0 {
		return pc
	}
	per := func(e perfevent.Event) *float64 {
		if t := total(e); t != nil {
			return Optional(PerRun(*t, float64(counted)))
		}
		return nil
	}
	pc.CPUClockNsPerRun = per(perfevent.CPUClock)
	pc.CyclesPerRun = per(perfevent.Cycles)
	pc.InstructionsPerRun = per(perfevent.Instructions)
	pc.LLCMissesPerRun = per(perfevent.LLCMisses)
	if cy, in := total(perfevent.Cycles), total(perfevent.Instructions); cy != nil && in != nil {
		pc.IPC = Optional(Ratio(*in, *cy))
	}
	if m, in := total(perfevent.LLCMisses), total(perfevent.Instructions); m != nil && in != nil {
		if v, ok := Ratio(*m, *in); ok {
			v *= 1000
			pc.LLCMissesPer1kInstructions = &v
		}
	}
	return pc
}

// Optional is v where ok, else nil: a number the JSON leaves out.
func Optional(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}

// SumRates adds the rates of programs read over the same interval: runs/s
// and CPU % add up, and ns/run is the run-weighted mean (run time per
// second over runs per second). A group none of whose members has a rate
// has none.
func SumRates(rs []Rates) Rates {
	var rps, cpu float64
	var haveRPS, haveCPU bool
	for _, r := range rs {
		if r.RunsPerSec != nil {
			rps, haveRPS = rps+*r.RunsPerSec, true
		}
		if r.CPUPercent != nil {
			cpu, haveCPU = cpu+*r.CPUPercent, true
		}
	}
	var out Rates
	if haveRPS {
		out.RunsPerSec = &rps
	}
	if haveCPU {
		out.CPUPercent = &cpu
	}
	if haveRPS && haveCPU && rps > 0 {
		// CPU % of one CPU = ns/s spent / 1e9 * 100.
		ns := cpu / 100 * 1e9 / rps
		out.AvgNsPerRun = &ns
	}
	return out
}
