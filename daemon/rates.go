package daemon

import (
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// ratesBetween computes rates over [a, b] taken elapsed apart. Counters that
// went backwards (a different instance, or a reset) give no rates.
func ratesBetween(a, b api.Counters, elapsed time.Duration) api.Rates {
	var r api.Rates
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
func avgSinceLoad(c api.Counters) *float64 {
	if c.RunCnt == 0 {
		return nil
	}
	return ptr(float64(c.RunTimeNs) / float64(c.RunCnt))
}

func ptr(f float64) *float64 { return &f }
