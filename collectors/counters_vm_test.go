package collectors

import (
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestTracingInVM boots the test VM (Debian's 6.1 kernel, which allows
// fentry/fexit) once, with the host's bpftool, and runs there the tests of
// what needs tracing programs, so that `go test ./...` on a host that
// refuses them still runs them: the exact counters, the latency windows and
// the names of tracing links' targets. One boot, not three: each cost
// 10-15 s of CI.
func TestTracingInVM(t *testing.T) {
	path, err := exec.LookPath("bpftool")
	if err != nil {
		privtest.Skip(t, "bpftool not installed (apt-get install bpftool)")
	}
	files, err := vmtest.HostBinary(path)
	if err != nil {
		t.Fatal(err)
	}
	vmtest.RunTests(t, vmtest.Config{Files: files, Timeout: 4 * time.Minute}, slices.Concat(
		[]string{
			"TestProbeCounters", "TestCountersNoBTF",
			"TestCountersExactCountsEachRun", "TestCountersExactGrowsWithWork", "TestCountersExactAgreesWithRunTime",
			"TestCountersExactDetachRemovesCost", "TestCountersExactStopsWhenOwnerLetsGo", "TestCountersExactWindowEnds",
			"TestCountersExactTooManyTargets",
		},
		[]string{
			"TestLatencyMix", "TestLatencyCalibration", "TestLatencyDetachLeavesNothing", "TestLatencyTooManyTargets",
			"TestLatencyPerRunEvent", "TestLatencyCyclesPerRun",
		},
		[]string{"TestTracingTargets"},
	))
}
