package collectors

import (
	"errors"
	"math"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestStatsCostRefusedWhileHeld: with stats held on (here by this test)
// there is no baseline, and the measurement says so instead of a number.
func TestStatsCostRefusedWhileHeld(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	held, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if c, err := MeasureStatsCost(3, 1000); !errors.Is(err, ErrStatsHeld) {
		t.Errorf("measured %+v, %v while stats were held on; want ErrStatsHeld", c, err)
	}
}

// TestStatsCost measures the cost where nobody else holds stats on (other
// test packages take the same lock; a holder outside the suite makes it a
// skip, never a pass) and checks it against a second mechanism: an
// empty program test-run in batches with stats off and on, timed by Go's
// monotonic clock rather than the kernel's test-run duration.
func TestStatsCost(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	c, err := MeasureStatsCost(5, 20000)
	if errors.Is(err, ErrStatsHeld) {
		privtest.Skip(t, "BPF run-time stats held on by a process outside the test suite: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	off, on := privtest.StatsCostByWallClock(t, 9, 100000)
	t.Logf("stats cost: %.1f ns/run off, %.1f on, %.1f per run; by the wall clock %.1f off, %.1f on, %.1f per run",
		c.OffNsPerRun, c.OnNsPerRun, c.NsPerRun(), off, on, on-off)
	if c.Rounds != 5 || c.Repeat != 20000 {
		t.Errorf("cost %+v: want the 5 rounds of 20000 runs asked for", c)
	}
	// Counting reads the clock twice per run: the second mechanism sees
	// a cost, or it proves nothing.
	if on-off < 5 {
		t.Fatalf("the wall clock sees stats cost %.1f ns/run (%.1f off, %.1f on): too little to compare with", on-off, off, on)
	}
	if math.Abs(c.OffNsPerRun-off) > 0.3*off+5 {
		t.Errorf("stats off: %.1f ns/run measured, the wall clock says %.1f", c.OffNsPerRun, off)
	}
	if math.Abs(c.NsPerRun()-(on-off)) > 0.25*(on-off)+3 {
		t.Errorf("stats cost: %.1f ns/run measured, the wall clock says %.1f (%.1f off, %.1f on)", c.NsPerRun(), on-off, off, on)
	}
}
