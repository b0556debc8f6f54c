package collectors

import (
	"errors"
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
// test packages may: then it must say so, never return a number).
func TestStatsCost(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	c, err := MeasureStatsCost(3, 20000)
	if errors.Is(err, ErrStatsHeld) {
		t.Logf("stats held on by another process: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// Counting reads the clock twice per run: it cannot be free, and an
	// empty program takes more than nothing.
	if c.OffNsPerRun <= 0 || c.NsPerRun() <= 0 || c.Rounds != 3 {
		t.Errorf("cost %+v: want off > 0 and on > off", c)
	}
	t.Logf("stats cost: %.0f ns/run off, %.0f on, %.0f per run", c.OffNsPerRun, c.OnNsPerRun, c.NsPerRun())
}
