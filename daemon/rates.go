package daemon

import "time"

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

// Counters are the cumulative bpf_stats of a program at one moment.
type Counters struct {
	RunTimeNs       uint64 `json:"run_time_ns"`
	RunCnt          uint64 `json:"run_cnt"`
	RecursionMisses uint64 `json:"recursion_misses"`
}

// ratesBetween computes rates over [a, b] taken elapsed apart. Counters that
// went backwards (a different instance, or a reset) give no rates.
func ratesBetween(a, b Counters, elapsed time.Duration) Rates {
	var r Rates
	if elapsed <= 0 || b.RunCnt < a.RunCnt || b.RunTimeNs < a.RunTimeNs {
		return r
	}
	runs := float64(b.RunCnt - a.RunCnt)
	ns := float64(b.RunTimeNs - a.RunTimeNs)
	secs := elapsed.Seconds()
	r.RunsPerSec = ptr(runs / secs)
	r.CPUPercent = ptr(ns / float64(elapsed.Nanoseconds()) * 100)
	if runs > 0 {
		r.AvgNsPerRun = ptr(ns / runs)
	}
	return r
}

// avgSinceLoad is the mean run time over the program's whole life.
func avgSinceLoad(c Counters) *float64 {
	if c.RunCnt == 0 {
		return nil
	}
	return ptr(float64(c.RunTimeNs) / float64(c.RunCnt))
}

func ptr(f float64) *float64 { return &f }
