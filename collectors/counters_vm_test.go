package collectors

import (
	"testing"

	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestCountersInVM boots the test VM (Debian's 6.1 kernel, which allows
// fentry/fexit) and runs the counter tests there, so that `go test ./...`
// on a host that refuses tracing programs still runs them.
func TestCountersInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{}, []string{
		"TestProbeCounters", "TestCountersNoBTF",
		"TestCountersExactCountsEachRun", "TestCountersExactGrowsWithWork", "TestCountersExactAgreesWithRunTime",
		"TestCountersExactDetachRemovesCost", "TestCountersExactStopsWhenOwnerLetsGo", "TestCountersExactWindowEnds",
		"TestCountersExactTooManyTargets",
	})
}
