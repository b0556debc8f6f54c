package regress

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// noisy returns n intervals around ns/run with ±spread uniform noise at
// load runs/s, one a second from start.
func noisy(rng *rand.Rand, start time.Time, n int, ns, spread, load float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{At: start.Add(time.Duration(i) * time.Second), NsPerRun: ns * (1 + spread*(2*rng.Float64()-1)), RunsPerSec: load}
	}
	return out
}

var t0 = time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)

func TestCompare(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name      string
		after     float64 // after's ns/run; before's is 100
		afterLoad float64
		kind      string
		undecided bool
		ratioLo   float64
		ratioHi   float64
	}{
		{"1.5x slower", 150, 1000, KindRegression, false, 1.45, 1.55},
		{"same", 100, 1000, "", false, 0.97, 1.03},
		{"5% slower: significant but under the minimum", 105, 1000, "", false, 1.02, 1.08},
		{"faster", 60, 1000, KindImprovement, false, 0.55, 0.65},
		{"load tripled: nothing to match", 150, 3000, "", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			r := Compare(noisy(rng, t0, 60, 100, 0.05, 1000), noisy(rng, t0.Add(time.Minute), 60, tc.after, 0.05, tc.afterLoad), cfg)
			if r.Kind != tc.kind || (r.Undecided != "") != tc.undecided {
				t.Fatalf("kind %q undecided %q, want %q undecided %v: %+v", r.Kind, r.Undecided, tc.kind, tc.undecided, r)
			}
			if tc.undecided {
				return
			}
			if r.Ratio < tc.ratioLo || r.Ratio > tc.ratioHi || r.RatioLo > r.Ratio || r.RatioHi < r.Ratio {
				t.Errorf("ratio %.3f [%.3f, %.3f], want within %.2f..%.2f and inside its interval", r.Ratio, r.RatioLo, r.RatioHi, tc.ratioLo, tc.ratioHi)
			}
			if r.NBefore != 60 || r.NAfter != 60 {
				t.Errorf("compared %d+%d samples, want 60+60", r.NBefore, r.NAfter)
			}
		})
	}
}

// Intervals at another load are left out: a before side that is half at
// double load compares only its matched half.
func TestCompareMatchesLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	before := append(noisy(rng, t0, 30, 100, 0.05, 1000), noisy(rng, t0.Add(30*time.Second), 30, 80, 0.05, 2000)...)
	r := Compare(before, noisy(rng, t0.Add(time.Minute), 40, 100, 0.05, 1000), DefaultConfig())
	if r.Kind != "" || r.NBefore != 30 || r.NAfter != 40 {
		t.Errorf("kind %q with %d+%d samples, want none with 30+40", r.Kind, r.NBefore, r.NAfter)
	}
}

func TestTracker(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Window = 20 * time.Second
	rng := rand.New(rand.NewPCG(5, 6))
	tr := NewTracker(cfg)
	var found []*Finding
	feed := func(tag string, from time.Time, n int, ns float64) {
		for _, s := range noisy(rng, from, n, ns, 0.05, 500) {
			if f := tr.Observe("socket_filter/x", tag, s); f != nil {
				found = append(found, f)
			}
		}
	}
	feed("aaaa", t0, 30, 100)
	feed("aaaa", t0.Add(30*time.Second), 30, 100) // same tag reloaded
	if len(found) != 0 {
		t.Fatalf("same tag: %d findings", len(found))
	}
	feed("bbbb", t0.Add(time.Minute), 30, 150)
	if len(found) != 1 {
		t.Fatalf("new tag: %d findings, want 1", len(found))
	}
	f := found[0]
	if f.Kind != KindRegression || f.OldTag != "aaaa" || f.NewTag != "bbbb" || !f.Changed.Equal(t0.Add(time.Minute)) {
		t.Errorf("finding %+v", f)
	}
	// Decided when the after side first spans the window, from a window
	// of history before the change.
	if d := f.AfterTo.Sub(f.Changed); d != cfg.Window {
		t.Errorf("decided %v after the change, want %v", d, cfg.Window)
	}
	if f.NBefore != 20 || f.NAfter != 21 {
		t.Errorf("compared %d+%d samples, want 20+21", f.NBefore, f.NAfter)
	}
	if f.Controls != 0 || f.Drift != 1 {
		t.Errorf("no other key, yet drift %v from %d controls", f.Drift, f.Controls)
	}
	tr.Forget(t0.Add(time.Hour))
	if tr.Keys() != 0 {
		t.Errorf("%d keys left after Forget", tr.Keys())
	}
}

// A machine that slows 30% at the reload slows every program: the new
// version that is as fast as the old one, on that machine, is no finding.
func TestTrackerDrift(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Window = 20 * time.Second
	rng := rand.New(rand.NewPCG(7, 8))
	tr := NewTracker(cfg)
	var found []*Finding
	for i := 0; i < 60; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		slow, tag := 1.0, "aaaa"
		if i >= 30 {
			slow, tag = 1.3, "bbbb"
		}
		for _, k := range []string{"c1", "c2", "c3"} {
			tr.Observe(k, "cccc", noisy(rng, at, 1, 200*slow, 0.05, 500)[0])
		}
		if f := tr.Observe("x", tag, noisy(rng, at, 1, 100*slow, 0.05, 500)[0]); f != nil {
			found = append(found, f)
		}
	}
	if len(found) != 1 || found[0].Kind != "" || found[0].Controls != 3 || found[0].Drift < 1.25 || found[0].Drift > 1.35 {
		t.Fatalf("findings %+v, want one without a kind, drift about 1.3 from 3 controls", found)
	}
}

// A machine that slows 30% for 30 s somewhere across the two windows, a
// neighbour beside the program feeling it alike: the finding's ratio is
// the program's own change (+12%) wherever the slow stretch falls,
// because each interval is divided by the machine's speed in that
// interval. One ratio over the windows (the drift before 2026-11-27) read
// 1.115 to 1.131 for the same change as the stretch moved (seed 0), and
// found nothing with the stretch at 100-130 s (seed 1).
func TestTrackerDriftStepInsideWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Window = 60 * time.Second
	for seed := uint64(0); seed < 3; seed++ {
		var ratios []float64
		for from := 10; from <= 100; from += 10 {
			rng := rand.New(rand.NewPCG(seed, 8))
			tr := NewTracker(cfg)
			var f *Finding
			for i := 0; i < 121; i++ {
				at := t0.Add(time.Duration(i) * time.Second)
				slow, tag, change := 1.0, "aaaa", 1.0
				if i >= from && i < from+30 {
					slow = 1.3
				}
				if i >= 60 {
					tag, change = "bbbb", 1.12
				}
				tr.Observe("neighbour", "cccc", noisy(rng, at, 1, 200*slow, 0.05, 500)[0])
				if g := tr.Observe("x", tag, noisy(rng, at, 1, 100*slow*change, 0.05, 500)[0]); g != nil {
					f = g
				}
			}
			if f == nil || f.Kind != KindRegression || f.Controls != 1 {
				t.Fatalf("seed %d, slow from %d s to %d s: finding %+v, want a regression told from 1 neighbour", seed, from, from+30, f)
			}
			ratios = append(ratios, f.Ratio)
		}
		if lo, hi := slices.Min(ratios), slices.Max(ratios); hi-lo > 0.01 {
			t.Errorf("seed %d: ratios %.3f to %.3f as the slow stretch moves, want within 0.01: %v", seed, lo, hi, ratios)
		}
	}
}
