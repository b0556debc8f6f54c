package loglinear

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value falls in the bucket whose bounds hold it, buckets are
// contiguous, and no bucket is wider than 1/32 of its lower bound.
func TestBuckets(t *testing.T) {
	if Buckets != 1024 {
		t.Fatalf("Buckets = %d, want 1024 (the C side's BUCKETS)", Buckets)
	}
	var prevHi uint64
	for i := range Buckets {
		lo, hi := Bounds(i)
		if lo != prevHi {
			t.Fatalf("bucket %d starts at %d, the last ended at %d", i, lo, prevHi)
		}
		if i >= 32 && i < Buckets-1 && float64(hi-lo)/float64(lo) > 1.0/32 {
			t.Errorf("bucket %d [%d,%d) is %.3f of its lower bound wide", i, lo, hi, float64(hi-lo)/float64(lo))
		}
		for _, v := range []uint64{lo, hi - 1, lo + (hi-lo)/2} {
			if b := Bucket(v); b != i {
				t.Fatalf("Bucket(%d) = %d, want %d [%d,%d)", v, b, i, lo, hi)
			}
		}
		prevHi = hi
	}
	if lo, _ := Bounds(Buckets - 1); lo != 63<<30 {
		t.Errorf("last bucket starts at %d, want 63<<30", lo)
	}
	if Bucket(math.MaxUint64) != Buckets-1 || Bucket(1<<40) != Buckets-1 {
		t.Error("values past 2^36 ns do not land in the last bucket")
	}
}

// Quantiles from the histogram agree with the exact quantiles of the same
// runs within RelError, for a two-mode mix like the one the VM test drives.
func TestQuantilesAgainstExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := New()
	var runs []uint64
	for range 100000 {
		v := uint64(400 + r.IntN(200))
		if r.IntN(100) == 0 {
			v = uint64(40000 + r.IntN(5000))
		}
		runs = append(runs, v)
		h.Add(v)
	}
	slices.Sort(runs)
	var sum uint64
	for _, v := range runs {
		sum += v
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := float64(runs[int(math.Ceil(q*float64(len(runs))))-1])
		got := h.Quantile(q)
		if math.Abs(got-exact)/exact > RelError {
			t.Errorf("q%.3f = %.0f, exact %.0f: more than %.2f%% apart", q, got, exact, 100*RelError)
		}
	}
	if h.Count != uint64(len(runs)) || h.Sum != sum || h.Max != runs[len(runs)-1] {
		t.Errorf("count %d sum %d max %d, want %d %d %d", h.Count, h.Sum, h.Max, len(runs), sum, runs[len(runs)-1])
	}
	if h.Mean() != float64(sum)/float64(len(runs)) {
		t.Errorf("mean %.1f", h.Mean())
	}
}

func TestQuantileEdges(t *testing.T) {
	h := New()
	if h.Quantile(0.5) != 0 || h.Mean() != 0 {
		t.Error("an empty histogram reads non-zero")
	}
	h.Add(7)
	if h.Quantile(0.5) != 7 || h.Quantile(1) != 7 {
		t.Errorf("one run of 7 ns: p50 %.0f p100 %.0f", h.Quantile(0.5), h.Quantile(1))
	}
	h.Add(1000)
	// The middle of 1000's bucket [992,1024) is 1008, above the max.
	if got := h.Quantile(1); got != 1000 {
		t.Errorf("p100 = %.0f, want the max 1000", got)
	}
	h.Add(100 << 30) // 107 s: past the last bucket's start
	if got := h.Quantile(1); got != 100<<30 {
		t.Errorf("p100 in the last bucket = %.0f, want the max", got)
	}
	o := New()
	o.Add(3)
	h.Merge(o)
	if h.Count != 4 || h.Quantile(0.25) != 3 {
		t.Errorf("after merge: count %d p25 %.0f", h.Count, h.Quantile(0.25))
	}
}

func TestSummarize(t *testing.T) {
	h := New()
	for range 99 {
		h.Add(1000)
	}
	h.Add(50000)
	s := h.Summarize(100)
	// 1000 ns is in [992,1008): its middle, 1000, less the floor; the
	// slow run is in [49152,50176).
	if s.Count != 100 || s.P50 != 900 || s.P90 != 900 || s.P99 != 900 || s.P999 != 49564 || s.Max != 49900 || s.Floor != 100 {
		t.Errorf("summary %+v", s)
	}
	if want := (99*1000+50000)/100.0 - 100; s.Mean != want {
		t.Errorf("mean %.1f, want %.1f", s.Mean, want)
	}
	if got := h.Summarize(2000); got.P50 != 0 {
		t.Errorf("a floor above the runs gives p50 %.0f, want 0", got.P50)
	}
	if got := New().Summarize(10); got != (Summary{Floor: 10}) {
		t.Errorf("empty: %+v", got)
	}
}

// Every bucket lies within one power of two, so summing by octave loses
// nothing but resolution.
func TestByOctave(t *testing.T) {
	for i := range Buckets - 1 {
		lo, hi := Bounds(i)
		if Octave(lo) != Octave(hi-1) {
			t.Fatalf("bucket %d [%d,%d) spans octaves %d and %d", i, lo, hi, Octave(lo), Octave(hi-1))
		}
	}
	h := New()
	for _, v := range []uint64{0, 1, 2, 3, 1000, 1023, 1024, 1 << 45} {
		h.Add(v)
	}
	o := h.ByOctave()
	want := map[int]uint64{0: 2, 1: 2, 9: 2, 10: 1, Octaves - 1: 1}
	for j, n := range o {
		if n != want[j] {
			t.Errorf("octave %d: %d runs, want %d", j, n, want[j])
		}
	}
}
