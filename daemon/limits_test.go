package daemon_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestLowFileLimit: with RLIMIT_NOFILE at 64 the daemon still sweeps 300
// programs (it holds none of their fds) and profiles; nothing in its log
// says it ran out of descriptors. It holds 27 fds of its own once started,
// and its start-up peaks at fd 32 (strace, 2026-11-25): the counters'
// probe (a program, BTF and maps) overlaps the first sweep's metadata
// reads and the test's own API connections. At 32, then 36, that peak ran
// out in CI; 64 leaves it room and still proves that no fd is kept per
// program: 300 would need 300.
func TestLowFileLimit(t *testing.T) {
	privtest.Root(t)
	const n = 300
	for i := range n {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("nofile_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
	}
	d := startDaemonUnder(t, []string{"prlimit", "--nofile=64:64", "--"}, t.TempDir(), "--profile.every", "1s")
	// prlimit execs bpfperfd: same pid.
	limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", d.cmd.Process.Pid))
	if !regexp.MustCompile(`Max open files\s+64\s+64`).Match(limits) {
		t.Fatalf("bpfperfd's limits:\n%s", limits)
	}
	var progs []api.ProgRow
	d.json(t, &progs, "progs")
	seen := 0
	for _, p := range progs {
		if strings.HasPrefix(p.Name, "nofile_") {
			seen++
		}
	}
	if seen != n {
		t.Errorf("progs lists %d of the %d programs", seen, n)
	}
	eventually(t, "a continuous profile window", func() bool {
		var st api.Status
		d.json(t, &st, "status")
		return st.Profiling != nil && st.Profiling.Windows > 0
	})
	if log := d.stderr.String(); strings.Contains(log, "too many open files") {
		t.Errorf("daemon ran out of descriptors:\n%s", log)
	}
}
