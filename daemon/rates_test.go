package daemon

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

func TestRatesBetween(t *testing.T) {
	a := api.Counters{RunTimeNs: 1_000, RunCnt: 10}
	b := api.Counters{RunTimeNs: 501_000, RunCnt: 1_010}
	r := ratesBetween(a, b, 2*time.Second)
	if *r.RunsPerSec != 500 || *r.AvgNsPerRun != 500 || *r.CPUPercent != 0.025 {
		t.Errorf("rates = %v/s %v ns %v%%", *r.RunsPerSec, *r.AvgNsPerRun, *r.CPUPercent)
	}

	idle := ratesBetween(b, b, time.Second)
	if *idle.RunsPerSec != 0 || idle.AvgNsPerRun != nil || *idle.CPUPercent != 0 {
		t.Errorf("idle: %+v, want 0 runs/s, no avg, 0%% CPU", idle)
	}
	for name, r := range map[string]api.Rates{
		"no time":   ratesBetween(a, b, 0),
		"backwards": ratesBetween(b, a, time.Second),
	} {
		if r.RunsPerSec != nil || r.AvgNsPerRun != nil || r.CPUPercent != nil {
			t.Errorf("%s: %+v, want no rates", name, r)
		}
	}
	if avgSinceLoad(api.Counters{}) != nil || *avgSinceLoad(b) != 501_000.0/1_010 {
		t.Error("avgSinceLoad wrong")
	}
}
