package collectors

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-perf"

	"github.com/bpfperf/bpfperf/internal/loglinear"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// The latency window's per-run event on a real PMU driver, exact: in the
// arm64 VM under icount (TestCountersPMUInVM), instructions retired are
// counted exactly, so each run's count can be held to the target's path
// through its JIT image.

// instructionsTimer is a latency timer counting instructions per run, and
// its calibration: the event's floor is the pair's own instructions
// between its two readings.
func instructionsTimer(t *testing.T) (*LatencyTimer, Calibration) {
	t.Helper()
	exactPMU(t)
	ev := perfevent.Instructions
	lt := latencyTimer(t, LatencyConfig{Event: &ev})
	cal, err := lt.Calibrate()
	if err != nil {
		t.Fatal(err)
	}
	if cal.EventErr != nil || cal.EventFloor <= 0 {
		t.Fatalf("calibration %+v: want an instructions floor", cal)
	}
	return lt, cal
}

// timeWideLoop times runs runs of a wide loop of turns turns
// (loadWideLoop) in a window of lt, and returns the reading with the
// loop's executed path in its JIT image.
func timeWideLoop(t *testing.T, lt *LatencyTimer, turns, runs int) (r LatencyReading, path, body int) {
	t.Helper()
	target := loadWideLoop(t, int32(turns))
	path, body, err := privtest.JitedPathARM64(target, turns)
	if err != nil {
		t.Fatal(err)
	}
	w := startLatency(t, lt, target, time.Minute)
	if err := privtest.Run(target, runs); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if r, err = w.Read(); err != nil {
		t.Fatal(err)
	}
	if r.EventHist == nil || r.EventErr != nil {
		t.Fatalf("reading: histogram %v, error %v; want instructions counted", r.EventHist != nil, r.EventErr)
	}
	return r, path, body
}

// lowestCounted is the range of the lowest bucket holding a run.
func lowestCounted(h *loglinear.Histogram) (lo, hi uint64) {
	for i, n := range h.Counts {
		if n > 0 {
			return loglinear.Bounds(i)
		}
	}
	return 0, 0
}

// TestLatencyInstructionsPerRun: a window's instructions per run of a
// loop program, less the event's floor (the pair's own instructions
// between its readings, from the calibration), equal the run's path
// through its arm64 JIT image within 1%, for two loop lengths, every run
// counted; the two lengths' difference per run is body × the turns
// between them within 1%.
func TestLatencyInstructionsPerRun(t *testing.T) {
	lt, cal := instructionsTimer(t)
	const runs = 30
	turnsOf := [2]int{15_000, 30_000}
	var net [2]float64
	var bodies [2]int
	for i, turns := range turnsOf {
		r, path, body := timeWideLoop(t, lt, turns, runs)
		e := r.EventHist
		mean := float64(e.Sum) / float64(e.Count)
		net[i], bodies[i] = mean-cal.EventFloor, body
		lo, _ := lowestCounted(e)
		t.Logf("%d turns: %d of %d runs counted, %d missed; %.0f instructions/run, %.0f less the floor (%.0f), JIT path %d: %+.3f%%; lowest bucket from %d, max %d",
			turns, e.Count, runs, r.EventMissed, mean, net[i], cal.EventFloor, path, 100*(net[i]/float64(path)-1), lo, e.Max)
		if r.Hist.Count != runs || e.Count != runs || r.EventMissed != 0 {
			t.Errorf("%d turns: %d timed, %d counted, %d missed; want all %d counted", turns, r.Hist.Count, e.Count, r.EventMissed, runs)
		}
		if math.Abs(net[i]/float64(path)-1) > 0.01 {
			t.Errorf("%d turns: %.0f instructions per run less the floor, want within 1%% of the JIT path's %d", turns, net[i], path)
		}
	}
	want := float64(bodies[0] * (turnsOf[1] - turnsOf[0]))
	if diff := net[1] - net[0]; bodies[0] != bodies[1] || math.Abs(diff/want-1) > 0.01 {
		t.Errorf("the longer loop counted %.0f more instructions per run, want body %d x %d turns = %.0f within 1%%", diff, bodies[0], turnsOf[1]-turnsOf[0], want)
	}
}

// crowdPMU opens n instruction events counting every task on CPU 0,
// flexible (not pinned), so that with the window's own event there are
// more than QEMU's PMUv3 has counters for them (6 beside the cycle
// counter, which counts cycles only) and the kernel multiplexes them all,
// the window's event included, rotating which are on the PMU at each
// multiplexing interval.
func crowdPMU(t *testing.T, n int) []*perf.Event {
	t.Helper()
	var evs []*perf.Event
	for range n {
		attr, err := perfevent.Instructions.CountingAttr()
		if err != nil {
			t.Fatal(err)
		}
		attr.CountFormat = perf.CountFormat{Enabled: true, Running: true}
		ev, err := perfevent.Open(perfevent.Instructions, attr, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ev.Close() })
		evs = append(evs, ev)
	}
	return evs
}

// muxInterval is the PMU's multiplexing interval as sysfs says it.
func muxInterval() string {
	paths, _ := filepath.Glob("/sys/bus/event_source/devices/armv8_pmuv3*/perf_event_mux_interval_ms")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b)) + " ms"
		}
	}
	return "unknown"
}

// TestLatencyMultiplexed: with more instruction events open on the CPU
// than the PMU has counters, the window's per-run event is multiplexed
// off the PMU for part of the window. A run it did not count all through
// is missed, never counted low: every run is timed, the runs counted are
// the workload's runs less those reported missed (some are: the event was
// off the PMU for part of the window), each counted run counted at least
// the loop's JIT path (no run near 0, nor cut short), and their mean less
// the floor is the path within 1%. Reading the event's enabled time alone
// (it moves while the event is off the PMU; running does not) counted
// the runs it was off as 0.
func TestLatencyMultiplexed(t *testing.T) {
	lt, cal := instructionsTimer(t) // calibrated before the PMU is crowded
	crowd := crowdPMU(t, 8)
	const turns, runs = 15_000, 200
	r, path, _ := timeWideLoop(t, lt, turns, runs)
	c, err := crowd[0].ReadCount()
	if err != nil {
		t.Fatal(err)
	}
	e := r.EventHist
	lo, hi := lowestCounted(e)
	mean := float64(e.Sum) / float64(e.Count)
	t.Logf("multiplexing interval %s; one of the 8 crowding events on the PMU %.0f%% of its %v; window: %d runs timed, %d counted, %d missed; lowest bucket [%d, %d), JIT path %d; mean %.0f, %.0f less the floor (%.0f): %+.3f%%",
		muxInterval(), 100*float64(c.Running)/float64(c.Enabled), c.Enabled, r.Hist.Count, e.Count, r.EventMissed, lo, hi, path,
		mean, mean-cal.EventFloor, cal.EventFloor, 100*((mean-cal.EventFloor)/float64(path)-1))
	if c.Running >= c.Enabled {
		t.Fatalf("a crowding event ran %v of %v enabled: the PMU was not multiplexed", c.Running, c.Enabled)
	}
	if r.Hist.Count != runs || e.Count+r.EventMissed != runs {
		t.Errorf("%d runs timed, %d counted + %d missed; want %d timed, each counted or missed", r.Hist.Count, e.Count, r.EventMissed, runs)
	}
	if r.EventMissed == 0 || e.Count < runs/10 {
		t.Errorf("%d runs counted, %d missed: want the event multiplexed off for some runs and on for others", e.Count, r.EventMissed)
	}
	if hi <= uint64(path) {
		t.Errorf("a run counted in [%d, %d) instructions, below the loop's JIT path of %d: a run the event was off the PMU for, counted low", lo, hi, path)
	}
	if net := mean - cal.EventFloor; math.Abs(net/float64(path)-1) > 0.01 {
		t.Errorf("%.0f instructions per counted run less the floor, want within 1%% of the JIT path's %d", net, path)
	}
}
