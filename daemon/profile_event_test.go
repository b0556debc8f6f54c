package daemon_test

import (
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// Profiling on cycles needs a PMU; without one the daemon says why once and
// profiles on cpu-clock (and status says so at once, never "available"
// before the event was tried). A bad event name stops it with one line.
func TestProfileEvent(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.event", "cycles", "--profile.every", "1s")
	var st api.Status
	d.json(t, &st, "status")
	if st.Profiling == nil {
		t.Fatal("status has no profiling")
	}
	logs := d.stderr.String()
	switch {
	case strings.Contains(logs, "no hardware PMU"):
		if st.Profiling.Event != "cpu-clock" {
			t.Errorf("without a PMU profiling runs on %q, want cpu-clock", st.Profiling.Event)
		}
	case st.Profiling.Event != "cycles":
		t.Errorf("with a PMU profiling runs on %q, want cycles", st.Profiling.Event)
	}

	var cycles *api.MechanismStatus
	for i, m := range st.Counters.Sampled {
		if m.Event == "cycles" {
			cycles = &st.Counters.Sampled[i]
		}
	}
	switch {
	case cycles == nil:
		t.Error("status lists no sampled cycles")
	case st.Profiling.Event == "cycles" && !cycles.Available:
		t.Errorf("profiling on cycles, but status says sampled cycles are not available: %+v", cycles)
	case st.Profiling.Event == "cpu-clock" && (cycles.Available || cycles.Reason == ""):
		t.Errorf("cycles did not open, but status says %+v", cycles)
	}

	stdout, stderr, code := run(bin.daemon, "--state-dir", t.TempDir(), "--profile.event", "bogus")
	oneLineError(t, "--profile.event bogus", stdout, stderr, code, "--profile.event")
}
