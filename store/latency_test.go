package store

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/loglinear"
)

func TestLatencyOctavesMatch(t *testing.T) {
	if LatencyOctaves != loglinear.Octaves {
		t.Fatalf("store keeps %d octaves, internal/loglinear has %d", LatencyOctaves, loglinear.Octaves)
	}
}

// Windows round-trip, come back in order and by range, the newest is
// found across sealed chunks, and another instance's windows stay apart.
func TestLatencyWindows(t *testing.T) {
	db, _ := openTemp(t)
	t0 := time.UnixMilli(1_800_000_000_000)
	k, other := counterProgram(t, db, 7, t0), counterProgram(t, db, 8, t0)
	var written []LatencyWindow
	for i := range 300 {
		w := LatencyWindow{Key: k, End: t0.Add(time.Duration(i) * time.Minute), Length: 10 * time.Second,
			Entries: uint64(1000 + i), Timed: uint64(1000 + i), Untimed: uint64(i % 3), SumNs: uint64(2_000_000 + i), MaxNs: 90_000,
			FloorNs: 300, AddedNs: 900, Quantiles: [4]uint64{1000, 1500, 80_000, 88_000}}
		w.Octaves[9], w.Octaves[16] = uint64(980+i), 20
		written = append(written, w)
		if err := db.WriteLatency(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.WriteLatency(LatencyWindow{Key: other, End: t0.Add(time.Hour * 10), Timed: 5}); err != nil {
		t.Fatal(err)
	}
	got, err := db.LatencySeries(k, t0.Add(10*time.Minute), t0.Add(19*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("%d windows in a 10-minute range, want 10", len(got))
	}
	for i, w := range got {
		want := written[10+i]
		want.End = want.End.Truncate(time.Millisecond)
		if !w.End.Equal(want.End) || w.Key != want.Key || w.Length != want.Length || w.Entries != want.Entries || w.Untimed != want.Untimed ||
			w.SumNs != want.SumNs || w.MaxNs != want.MaxNs || w.FloorNs != want.FloorNs || w.AddedNs != want.AddedNs ||
			w.Quantiles != want.Quantiles || w.Octaves != want.Octaves {
			t.Fatalf("window %d: %+v, want %+v", i, w, want)
		}
	}
	last, ok, err := db.LastLatency(k)
	if err != nil || !ok || last.Entries != written[299].Entries {
		t.Fatalf("last window: %+v %v %v, want the 300th", last, ok, err)
	}
	if _, ok, _ := db.LastLatency(InstanceKey{Boot: 1, ID: 9}); ok {
		t.Error("a window for an instance that has none")
	}
	if problems, err := db.Check(); err != nil || len(problems) != 0 {
		t.Errorf("check after writing latency windows: %v %v", err, problems)
	}
	st, err := db.Stats()
	if err != nil || st.Groups["latency"].Samples != 301 {
		t.Errorf("store stats: %v %+v, want 301 latency samples", err, st.Groups["latency"])
	}
}

// Windows with a per-run event (ten more columns) and without one share a
// series: each width starts a chunk of its own, both read back, the event
// round-trips, and they still do once merged into a segment.
func TestLatencyWindowsPerRunEvent(t *testing.T) {
	db, _ := openTemp(t)
	t0 := time.UnixMilli(1_800_000_000_000)
	k := counterProgram(t, db, 7, t0)
	var written []LatencyWindow
	for i := range 40 {
		w := LatencyWindow{Key: k, End: t0.Add(time.Duration(i) * time.Hour), Length: 10 * time.Second,
			Entries: uint64(1000 + i), Timed: uint64(1000 + i), SumNs: 2_000_000, MaxNs: 90_000, FloorNs: 300, AddedNs: 900,
			Quantiles: [4]uint64{1000, 1500, 80_000, 88_000}}
		w.Octaves[9] = uint64(1000 + i)
		if i/5%2 == 1 { // five without, five with, and so on
			w.PerRun = &LatencyEvent{Event: 1, Counted: uint64(990 + i), Missed: 10, Sum: 3_000_000, Max: 270_000, Floor: 800,
				Quantiles: [4]uint64{3000, 4500, 240_000, 260_000}}
		}
		written = append(written, w)
		if err := db.WriteLatency(w); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		got, err := db.LatencySeries(k, t0, t0.Add(100*time.Hour))
		if err != nil || len(got) != len(written) {
			t.Fatalf("%s: %d windows, %v; want %d", when, len(got), err, len(written))
		}
		for i, w := range got {
			want := written[i]
			if w.Entries != want.Entries || w.Octaves != want.Octaves || (w.PerRun == nil) != (want.PerRun == nil) ||
				(w.PerRun != nil && *w.PerRun != *want.PerRun) {
				t.Fatalf("%s: window %d: %+v (per run %+v), want %+v (per run %+v)", when, i, w, w.PerRun, want, want.PerRun)
			}
		}
		if problems, err := db.Check(); err != nil || len(problems) != 0 {
			t.Errorf("%s: check: %v %v", when, err, problems)
		}
	}
	check("written")
	last, ok, err := db.LastLatency(k)
	if err != nil || !ok || last.PerRun == nil || last.PerRun.Counted != written[39].PerRun.Counted {
		t.Fatalf("last window: %+v %v %v, want the 40th with its event", last, ok, err)
	}
	if n, err := db.Merge(t0.Add(200 * 24 * time.Hour)); err != nil || n == 0 {
		t.Fatalf("merge: %d segments, %v", n, err)
	}
	check("merged")
}
