package main

import (
	"testing"

	"github.com/bpfperf/bpfperf/api"
)

// status's daemon cpu names its window: since start in the first minute
// (start-up's one-off work inside it), the last minute after.
func TestDaemonCPUWindow(t *testing.T) {
	for _, c := range []struct {
		uptime float64
		want   string
	}{
		{0.4, "55.87% of one CPU (since start, 0s: start-up included)"},
		{59, "55.87% of one CPU (since start, 59s: start-up included)"},
		{60, "55.87% of one CPU (last minute)"},
	} {
		if got := daemonCPU(api.Status{UptimeSeconds: c.uptime, CPUPercent: 55.87}); got != c.want {
			t.Errorf("uptime %v s: %q, want %q", c.uptime, got, c.want)
		}
	}
}
