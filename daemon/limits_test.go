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

// TestLowFileLimit: with RLIMIT_NOFILE at 36 the daemon still sweeps 300
// programs (it holds none of their fds) and profiles; nothing in its log
// says it ran out of descriptors. It holds 27 fds of its own once started
// (2026-11-25); at 32 the counters' start-up probe (its maps and programs)
// and the first sweep's metadata reads, which overlap, once ran out in CI.
// 36 still proves that no fd is kept per program: 300 would need 300.
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
	d := startDaemonUnder(t, []string{"prlimit", "--nofile=36:36", "--"}, t.TempDir(), "--profile.every", "1s")
	// prlimit execs bpfperfd: same pid.
	limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", d.cmd.Process.Pid))
	if !regexp.MustCompile(`Max open files\s+36\s+36`).Match(limits) {
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
