package daemon_test

import (
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestDaemonInVM boots the test VM (Debian's 6.1: fentry/fexit and
// kprobes, which this host's kernel refuses) once, with bpfperfd and
// bpfperf built for it and the host's execsnoop, vfsstat and bpftool, and
// runs there the end-to-end tests that need them: exact counters, the JSON
// parity of the views that need fentry, latency windows (a regression its
// tail decides, a window on a program we did not write), probe hooks and
// the trampolines of a real tool. One boot, not four: each boot with its
// binaries cost 15-20 s of CI.
// 8 minutes: the latency tests took up to 2 of them on a loaded host,
// TestRegressionByTail may try three times, 25 s each, and the probe
// hooks took 50 s.
func TestDaemonInVM(t *testing.T) {
	tools := hostTools(t, "execsnoop", "vfsstat", "bpftool")
	vmtest.RunTestsWithCommands(t, vmtest.Config{Files: tools, Timeout: 8 * time.Minute}, []string{"../cmd/bpfperfd", "../cmd/bpfperf"},
		slices.Concat(
			[]string{"TestCountersExactEndToEnd", "TestJSONParityFentry"},
			[]string{"TestLatencyEndToEnd", "TestLatencyPerRunEndToEnd", "TestRegressionByTail", "TestRealToolsLatencyExecsnoop"},
			[]string{"TestProbeHooksEndToEnd"},
			[]string{"TestRealToolsTrampolineVfsstat"},
		))
}
