package perfevent

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/elastic/go-perf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func group(enabled, running time.Duration, values ...uint64) perf.GroupCount {
	g := perf.GroupCount{Enabled: enabled, Running: running}
	for _, v := range values {
		g.Values = append(g.Values, struct {
			Value uint64
			ID    uint64
			Label string
		}{Value: v})
	}
	return g
}

// What a group counted between two reads is scaled by enabled/running when
// it was multiplexed, like perf stat, with its share of time on the PMU.
func TestGroupDelta(t *testing.T) {
	start := group(100, 100, 5, 7)
	got, share, err := groupDelta(start, group(1100, 1100, 15, 27), 2)
	if err != nil || share != 1 || got[0] != 10 || got[1] != 20 {
		t.Errorf("whole window: %v %v %v", got, share, err)
	}
	got, share, err = groupDelta(start, group(1100, 350, 15, 27), 2)
	if err != nil || share != 0.25 || got[0] != 40 || got[1] != 80 {
		t.Errorf("multiplexed a quarter of the time: %v %v %v", got, share, err)
	}
	got, share, err = groupDelta(start, group(1100, 100, 5, 7), 2)
	if err != nil || share != 0 || got[0] != 0 {
		t.Errorf("never on the PMU: %v %v %v", got, share, err)
	}
	if _, _, err := groupDelta(start, group(1, 1, 1, 2, 3), 2); err == nil {
		t.Error("a group of 3 read as 2: want an error")
	}
}

// ThreadCounters count the calling thread only, around a test run: its
// cpu-clock per run matches the kernel's own mean duration of the runs
// (BPF_PROG_TEST_RUN's, which covers its loop), and a thread waiting
// counts nothing while another one spins. cpu-clock stands in for the
// hardware events, which go through the same group, enable, read and
// scaling.
func TestThreadCounters(t *testing.T) {
	privtest.Root(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenThreadCounters([]Event{CPUClock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prog, err := privtest.LoadLoop("perfevent_tc", 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const repeat = 2000
	var ratios []float64
	for range 5 {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		_, perRun, err := prog.Benchmark(make([]byte, 14), repeat, nil)
		counts, share, serr := c.Stop()
		if err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		if share != 1 {
			t.Errorf("cpu-clock multiplexed: share %v", share)
		}
		ratios = append(ratios, counts[0]/repeat/float64(perRun.Nanoseconds()))
	}
	slices.Sort(ratios)
	t.Logf("cpu-clock counted per run / the kernel's mean per run: %.3f", ratios)
	if m := ratios[2]; m < 0.95 || m > 1.15 {
		t.Errorf("counted cpu-clock per run is %.3f of the kernel's duration, want 0.95..1.15", m)
	}

	busy := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
		}
		close(busy)
	}()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	<-busy
	counts, _, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] > float64(10*time.Millisecond) {
		t.Errorf("a waiting thread counted %.1f ms of cpu-clock while another spun 60 ms", counts[0]/1e6)
	}
}

// Hardware events on a thread open where a PMU exists, and fail naming
// the missing PMU where none does.
func TestThreadCountersHardware(t *testing.T) {
	privtest.Root(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenThreadCounters([]Event{Cycles, Instructions, LLCMisses})
	if errors.Is(err, ErrNoPMU) {
		t.Logf("no PMU: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	counts, share, err := c.Stop()
	if err != nil || len(counts) != 3 || share < 0 {
		t.Errorf("hardware group: %v %v %v", counts, share, err)
	}
}
