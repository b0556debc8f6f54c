package privtest

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The kernel counts every BPF_PROG_TEST_RUN in run_cnt while stats are on:
// the rest of the suite builds on that, so check it here first.
func TestRunCountsExactly(t *testing.T) {
	Root(t)
	LockStats(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		Skip(t, "BPF_ENABLE_STATS: "+err.Error())
	}
	defer stats.Close()

	prog, err := LoadLoop("privtest_loop", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const runs = 1237
	if err := Run(prog, runs); err != nil {
		t.Fatal(err)
	}
	st, err := prog.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RunCount != runs {
		t.Errorf("run_cnt = %d, want %d", st.RunCount, runs)
	}
	if st.Runtime <= 0 {
		t.Errorf("run_time = %v, want > 0", st.Runtime)
	}

	stats.Close()
	on, err := StatsCounting()
	if err != nil {
		t.Fatal(err)
	}
	if on {
		t.Log("stats still counting after closing our fd: another process holds one or the sysctl is set")
	}
}
