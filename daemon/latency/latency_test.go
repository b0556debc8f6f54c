package latency

import (
	"fmt"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/loglinear"
	"github.com/bpfperf/bpfperf/store"
)

// A reading goes to the store and back to the API with the floor taken
// off every figure, none below 0, and the runs by power of two.
func TestStoredAndView(t *testing.T) {
	h := loglinear.New()
	for range 98 {
		h.Add(1000)
	}
	h.Add(50)
	h.Add(40000)
	r := collectors.LatencyReading{Entries: 101, Untimed: 1, Hist: h}
	start := time.UnixMilli(1_800_000_000_000)
	key := store.InstanceKey{Boot: 1, ID: 9}
	sw := Stored(key, r, collectors.Calibration{FloorNs: 99.6, AddedNs: 850.2}, start, start.Add(10*time.Second))
	if sw.Timed != 100 || sw.Entries != 101 || sw.Untimed != 1 || sw.FloorNs != 100 || sw.AddedNs != 850 || sw.MaxNs != 40000 || sw.Length != 10*time.Second {
		t.Fatalf("stored %+v", sw)
	}
	v := View(sw, "xdp_lb")
	if v.Runs != 100 || v.P50Ns != 900 || v.P99Ns != 900 || v.P999Ns != float64(h.Quantile(0.999))-100 || v.MaxNs != 39900 || v.FloorNs != 100 || v.AddedNsPerRun != 850 {
		t.Errorf("view %+v", v)
	}
	if want := float64(98*1000+50+40000)/100 - 100; v.MeanNs != want {
		t.Errorf("mean %.2f, want %.2f", v.MeanNs, want)
	}
	want := []api.LatencyBucket{{LoNs: 32, HiNs: 64, Runs: 1}, {LoNs: 512, HiNs: 1024, Runs: 98}, {LoNs: 32768, HiNs: 65536, Runs: 1}}
	if fmt.Sprint(v.Buckets) != fmt.Sprint(want) {
		t.Errorf("buckets %v, want %v", v.Buckets, want)
	}
	if !v.Start.Equal(start) || v.Duration != 10 {
		t.Errorf("start %v duration %v", v.Start, v.Duration)
	}
	// A floor above a run's time reads 0, not less.
	sw.FloorNs = 2000
	if v := View(sw, "x"); v.P50Ns != 0 || v.MeanNs < 0 {
		t.Errorf("floor above the runs: %+v", v)
	}
}

// /metrics keeps at most maxLast programs' windows, the newest.
func TestLastBounded(t *testing.T) {
	l := New(Config{}, Deps{})
	t0 := time.UnixMilli(1_800_000_000_000)
	for i := range maxLast + 10 {
		l.keepLast(store.InstanceKey{Boot: 1, ID: uint32(i)}, api.LatencyWindow{End: t0.Add(time.Duration(i) * time.Second)})
	}
	last := l.Last()
	if len(last) != maxLast {
		t.Fatalf("%d windows kept, want %d", len(last), maxLast)
	}
	for k := range last {
		if k.ID < 10 {
			t.Errorf("kept program %d's window, one of the 10 oldest", k.ID)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, c := range []Config{{Window: time.Millisecond}, {Window: time.Hour}, {Window: time.Minute, Every: time.Second}, {Max: 17}, {Programs: []string{"["}}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TimedBetween: an interval is timed when any window, closed or still
// open, overlaps it.
func TestTimedBetween(t *testing.T) {
	l := New(Config{}, Deps{})
	key := store.InstanceKey{Boot: 1, ID: 3}
	t0 := time.UnixMilli(1_800_000_000_000)
	l.timed[key] = []span{{start: t0, end: t0.Add(2 * time.Second)}, {start: t0.Add(10 * time.Second)}}
	for _, c := range []struct {
		from, to time.Duration
		want     bool
	}{
		{-time.Second, 0, false}, // ends as the window starts
		{time.Second, 3 * time.Second, true},
		{2 * time.Second, 9 * time.Second, false},  // between windows
		{9 * time.Second, 11 * time.Second, true},  // the open one
		{20 * time.Second, 21 * time.Second, true}, // still open
	} {
		if got := l.TimedBetween(key, t0.Add(c.from), t0.Add(c.to)); got != c.want {
			t.Errorf("(%v, %v]: %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if l.TimedBetween(store.InstanceKey{Boot: 1, ID: 4}, t0, t0.Add(time.Second)) {
		t.Error("an instance never timed reads timed")
	}
}

// What timing added, measured over a window: bpf_stats' mean less the
// timed mean, plus the floor that lies in both.
func TestMeasuredAdded(t *testing.T) {
	h := loglinear.New()
	for range 100 {
		h.Add(1300) // 1000 ns of program, 300 of floor
	}
	r := collectors.LatencyReading{Hist: h, Stats: collectors.TargetStats{RunTimeNs: 100 * 2900, Runs: 100}} // 1000 + 1900 added
	if a, ok := measuredAdded(r, 300); !ok || a != 1900 {
		t.Errorf("measuredAdded = %v, %v; want 1900", a, ok)
	}
	r.Stats = collectors.TargetStats{}
	if _, ok := measuredAdded(r, 300); ok {
		t.Error("measured with stats off")
	}
}
