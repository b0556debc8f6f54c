package daemon_test

import (
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestSweepIterator: by default on this kernel the daemon reads programs
// with the iterator, proved against OBJ_GET_INFO_BY_FD at start, lists the
// iterator as its own program and shows its run time as the cost.
func TestSweepIterator(t *testing.T) {
	privtest.Root(t)
	// An idle program to prove the iterator on: a host with none leaves
	// the proof for later (TestSweeperRetriesAProofWithNothingToCompare).
	idle, err := privtest.LoadSocketFilter("sweep_idle")
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	d := startDaemon(t, t.TempDir())
	var st api.Status
	d.json(t, &st, "status")
	if st.Sweep != "iter" || !strings.Contains(st.SweepDetail, "equal to OBJ_GET_INFO_BY_FD") {
		t.Fatalf("sweep %q (%s), want iter proved against OBJ_GET_INFO_BY_FD\n%s", st.Sweep, st.SweepDetail, d.stderr)
	}
	if st.Holders != "iterator (iter/task_file)" {
		t.Errorf("holders read by %q, want the iterator", st.Holders)
	}
	eventually(t, "the sweep's and the holders' iterators listed as bpfperfd's own programs", func() bool {
		var rows []api.ProgRow
		if d.query(&rows, "progs", "--all") != nil {
			return false
		}
		own := 0
		for _, r := range rows {
			if (r.Name == "bpfperf_progs" || r.Name == "bpfperf_holders") && r.Own {
				own++
			}
		}
		return own == 2
	})
	eventually(t, "the sweep's BPF cost in status", func() bool {
		return d.query(&st, "status") == nil && st.SweepBPFMs > 0 && st.SweepBPFCPUPercent > 0
	})
}

// TestSweepFd: --sweep fd reads every program by fd, as before.
func TestSweepFd(t *testing.T) {
	privtest.Root(t)
	prog, err := privtest.LoadSocketFilter("sweep_fd")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	d := startDaemon(t, t.TempDir(), "--sweep", "fd")
	var st api.Status
	d.json(t, &st, "status")
	if st.Sweep != "fd" || st.SweepDetail != "--sweep fd" || st.SweepBPFMs != 0 {
		t.Errorf("status says sweep %q (%s), bpf %v ms; want fd, --sweep fd, no BPF cost", st.Sweep, st.SweepDetail, st.SweepBPFMs)
	}
	if st.ProgramsLoaded == 0 {
		t.Error("fd sweep found no programs")
	}
}

// TestSweepFallback: a kernel that refuses the iterator (simulated) leaves
// the daemon on the fd sweep, saying why in one log line and in status;
// --sweep iter refuses to start instead.
func TestSweepFallback(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--debug.sweep-fail-load")
	var st api.Status
	d.json(t, &st, "status")
	if st.Sweep != "fd" || !strings.Contains(st.SweepDetail, "simulated") {
		t.Errorf("status says sweep %q (%s); want fd, fell back on the simulated failure", st.Sweep, st.SweepDetail)
	}
	if n := strings.Count(d.stderr.String(), "iterator sweep off"); n != 1 {
		t.Errorf("%d log lines say the iterator is off, want 1:\n%s", n, d.stderr)
	}
	dir := t.TempDir()
	stdout, stderr, code := run(bin.daemon, "--state-dir", dir, "--socket", dir+"/s.sock", "--sweep", "iter", "--debug.sweep-fail-load")
	oneLineError(t, "--sweep iter on a kernel that refuses it", stdout, stderr, code, "--sweep iter")
}
