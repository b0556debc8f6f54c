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

// status names a stuck store on a line of its own, and only then.
func TestStatusStoreStuck(t *testing.T) {
	line := func(s api.Status) string {
		for _, kv := range statusFields(s) {
			if kv[0] == "store stuck" {
				return kv[1]
			}
		}
		return ""
	}
	if got := line(api.Status{}); got != "" {
		t.Errorf("a store that answers: store stuck %q", got)
	}
	want := "a read has waited 9.7s: a write is stuck in the kernel (frozen or hung disk?); programs seen and stored profiles are the last counted"
	if got := line(api.Status{StoreUnansweredSeconds: 9.71}); got != want {
		t.Errorf("store stuck %q, want %q", got, want)
	}
}
