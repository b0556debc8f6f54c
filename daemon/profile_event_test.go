package daemon_test

import (
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// Profiling on cycles needs a PMU; without one the daemon says so once and
// profiles on cpu-clock. A bad event name stops it with one line.
func TestProfileEvent(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.event", "cycles", "--profile.every", "1s")
	var st daemon.Status
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

	stdout, stderr, code := run(bin.daemon, "--state-dir", t.TempDir(), "--profile.event", "instructions")
	oneLineError(t, "--profile.event instructions", stdout, stderr, code, "--profile.event")
}
