package privtest

import (
	"errors"
	"os"
	"path/filepath"
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

// PMU skips only when the kernel's answer and sysfs agree there is no PMU:
// a probe answering ENOENT on a machine whose sysfs lists a core PMU is a
// broken probe and fails, as does any refusal other than ENOENT, ENODEV
// (no PMU) and EACCES, EPERM (privilege, which fails in CI through Skip).
func TestPMUVerdict(t *testing.T) {
	sysfs := func(devices map[string]string) string {
		root := t.TempDir()
		for name, typ := range devices {
			dir := filepath.Join(root, eventSources, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "type"), []byte(typ+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	// This host's event sources (no PMU), and two machines with one.
	none := sysfs(map[string]string{"breakpoint": "5", "msr": "9", "software": "1", "tracepoint": "2", "uprobe": "8"})
	x86 := sysfs(map[string]string{"cpu": "4", "software": "1", "tracepoint": "2"})
	arm := sysfs(map[string]string{"armv8_pmuv3_0": "10", "software": "1"})
	raw := sysfs(map[string]string{"some_core": "4", "software": "1"})
	for _, c := range []struct {
		name         string
		probe        error
		sysfs        string
		noPMU, fails bool
	}{
		{"a PMU counts", nil, x86, false, false},
		{"no PMU, sysfs agrees", unix.ENOENT, none, true, false},
		{"no PMU (ENODEV), sysfs agrees", unix.ENODEV, none, true, false},
		{"ENOENT but sysfs has cpu", unix.ENOENT, x86, false, true},
		{"ENOENT but sysfs has an arm PMU", unix.ENOENT, arm, false, true},
		{"ENOENT but sysfs has a PERF_TYPE_RAW source", unix.ENOENT, raw, false, true},
		{"ENOENT and no sysfs to check", unix.ENOENT, t.TempDir(), false, true},
		{"not permitted", unix.EACCES, x86, false, false},
		{"counters busy", unix.EBUSY, x86, false, true},
		{"refused", unix.EINVAL, none, false, true},
	} {
		skip, err := pmuVerdict(c.probe, c.sysfs)
		if (err != nil) != c.fails || errors.Is(skip, errNoPMU) != c.noPMU {
			t.Errorf("%s: skip %v, err %v; want no PMU %v, failure %v", c.name, skip, err, c.noPMU, c.fails)
		}
		if c.probe == nil && skip != nil {
			t.Errorf("%s: skips: %v", c.name, skip)
		}
	}
}

// On this machine the raw cycles probe and sysfs agree, whichever way: a
// disagreement fails here, not only in the tests that call PMU.
func TestPMUProbeAgreesWithSysfs(t *testing.T) {
	Root(t)
	skip, err := pmuVerdict(probeCycles(), "/sys")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PMU: %v (nil: one counts)", skip)
	if skip != nil && !errors.Is(skip, errNoPMU) {
		Skip(t, skip.Error())
	}
}

// JitedLoop finds LoadLoop's loop in its JIT image: a body of a few
// instructions (sub, compare, branch) and a prologue and epilogue around
// it, so that a 2,000-turn run executes about 2,000 × body instructions.
func TestJitedLoop(t *testing.T) {
	Root(t)
	prog, err := LoadLoop("privtest_jit", 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	body, rest, err := JitedLoop(prog)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loop body %d instructions, %d outside: %d per 2,000-turn run", body, rest, body*2000+rest)
	if body < 2 || body > 6 || rest < 3 || rest > 60 {
		t.Errorf("loop body %d instructions, %d outside it: not LoadLoop's shape", body, rest)
	}
}
