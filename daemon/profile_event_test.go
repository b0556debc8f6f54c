package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// Profiling on cycles needs a PMU; without one the daemon says why once and
// profiles on cpu-clock (and status says so at once, never "available"
// before the event was tried). A bad event name stops it with one line.
//
// Whether the machine has a PMU is judged apart from the daemon
// (privtest.NoPMU: the kernel's answer and sysfs), and the daemon must
// agree: the branch is never chosen from its own output.
func TestProfileEvent(t *testing.T) {
	privtest.Root(t)
	noPMU := privtest.NoPMU(t) != ""
	d := startDaemon(t, t.TempDir(), "--profile.event", "cycles", "--profile.every", "1s")
	// Profiling and counters show in status once each is set up, which
	// may end after the first tick (the kernel filter loads and reads
	// kallsyms first; the arm64 VM is slow).
	var st api.Status
	eventuallyWithin(t, 30*time.Second, "profiling and counters in status", func() bool {
		st = api.Status{}
		return d.query(&st, "status") == nil && st.Profiling != nil && st.Counters != nil
	})
	logs := d.stderr.String()
	switch {
	case noPMU && (!strings.Contains(logs, "no hardware PMU") || st.Profiling.Event != "cpu-clock"):
		t.Errorf("without a PMU profiling runs on %q, want cpu-clock with the reason logged:\n%s", st.Profiling.Event, logs)
	case !noPMU && st.Profiling.Event != "cycles":
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

	// An on-demand capture on cycles: a cycles profile where a PMU exists,
	// one line saying why not where none does. A bad event is refused
	// before the daemon is asked.
	file := filepath.Join(t.TempDir(), "cycles.pb.gz")
	stdout, stderr, code := run(bin.cli, "--socket", d.socket, "profile", "capture", "--event", "cycles", "--duration", "300ms", "-o", file)
	if noPMU {
		oneLineError(t, "capture --event cycles without a PMU", stdout, stderr, code, "no hardware PMU (ENOENT)")
	} else {
		if code != 0 {
			t.Fatalf("capture --event cycles: exit %d: %s", code, stderr)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pprof.ParseData(data)
		if err != nil || p.SampleType[1].Type != "cycles" {
			t.Errorf("cycles capture: %v, sample types %v", err, p.SampleType)
		}
	}
	stdout, stderr, code = run(bin.cli, "--socket", d.socket, "profile", "capture", "--event", "bogus", "--duration", "300ms")
	oneLineError(t, "capture --event bogus", stdout, stderr, code, "--event")

	stdout, stderr, code = run(bin.daemon, "--state-dir", t.TempDir(), "--profile.event", "bogus")
	oneLineError(t, "--profile.event bogus", stdout, stderr, code, "--profile.event")
}
