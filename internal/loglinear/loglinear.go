// Package loglinear is the per-run latency histogram that the latency
// window (bpf/latency/latency.c) fills in the kernel: its buckets, and the
// count, mean, quantiles and max read from it.
//
// The buckets are log-linear, like HdrHistogram's: a value below 32 ns
// has a bucket of its own; above, each power of two is cut into 32 equal
// buckets, so a bucket is at most 1/32 of its lower bound wide. A quantile
// is read as the middle of its bucket, at most half a bucket from the
// true value: RelError. The last bucket takes everything from 2^36 ns
// (68 s) up; Max is exact.
package loglinear

import (
	"math"
	"math/bits"
)

const (
	subBits  = 5
	subCount = 1 << subBits
	maxExp   = 35
	// Buckets is how many buckets a histogram has; the C side's BUCKETS.
	Buckets = (maxExp - subBits + 2) * subCount
	// RelError bounds a quantile's error relative to the true value: half
	// a bucket over its lower bound.
	RelError = 1.0 / (2 * subCount)
)

// Bucket returns the bucket that holds ns.
func Bucket(ns uint64) int {
	if ns < subCount {
		return int(ns)
	}
	e := bits.Len64(ns) - 1
	if e > maxExp {
		return Buckets - 1
	}
	return (e-subBits+1)*subCount + int(ns>>(e-subBits))&(subCount-1)
}

// Bounds returns bucket i's range of ns, [lo, hi). The last bucket's hi is
// math.MaxUint64.
func Bounds(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i) + 1
	}
	e := i/subCount + subBits - 1
	sub := uint64(i % subCount)
	lo = (subCount + sub) << (e - subBits)
	hi = (subCount + sub + 1) << (e - subBits)
	if i == Buckets-1 {
		hi = math.MaxUint64
	}
	return lo, hi
}

// Histogram is the runs of one window, summed over CPUs.
type Histogram struct {
	Counts []uint64 // Buckets long; Counts[i] runs took Bounds(i)
	Count  uint64   // runs timed: the sum of Counts
	Sum    uint64   // their total ns
	Max    uint64   // the longest, exact
}

// New returns an empty histogram.
func New() Histogram { return Histogram{Counts: make([]uint64, Buckets)} }

// Add records one run of ns.
func (h *Histogram) Add(ns uint64) {
	h.Counts[Bucket(ns)]++
	h.Count++
	h.Sum += ns
	h.Max = max(h.Max, ns)
}

// Merge adds o's runs to h.
func (h *Histogram) Merge(o Histogram) {
	for i, n := range o.Counts {
		h.Counts[i] += n
	}
	h.Count += o.Count
	h.Sum += o.Sum
	h.Max = max(h.Max, o.Max)
}

// Mean returns the mean ns per run, exact (from Sum), or 0 with no runs.
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.Sum) / float64(h.Count)
}

// Quantile returns the q-quantile (0 < q <= 1) in ns: the middle of the
// bucket that holds the ceil(q*Count)-th shortest run, never above Max,
// within RelError of the true value. It returns 0 with no runs.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.Count)))
	rank = min(max(rank, 1), h.Count)
	var seen uint64
	for i, n := range h.Counts {
		seen += n
		if seen < rank {
			continue
		}
		lo, hi := Bounds(i)
		switch {
		case hi-lo == 1:
			return float64(lo) // exact
		case i == Buckets-1:
			return float64(h.Max) // unbounded: the longest run is the best bound
		}
		return math.Min(float64(lo)+float64(hi-lo)/2, float64(h.Max))
	}
	return float64(h.Max)
}

// Summary is what the views show of a window: the timed runs' count, and
// mean, quantiles and max in ns with the timing floor taken off.
type Summary struct {
	Count uint64
	Mean  float64
	P50   float64
	P90   float64
	P99   float64
	P999  float64
	Max   float64
	// Floor is what timing adds inside each measured interval (measured
	// on an empty program: the trampoline's calls and the clock reads),
	// taken off every figure above, none below 0.
	Floor float64
}

// Summarize reads h's figures and takes floor off each.
func (h Histogram) Summarize(floor float64) Summary {
	less := func(v float64) float64 { return math.Max(v-floor, 0) }
	s := Summary{Count: h.Count, Floor: floor}
	if h.Count == 0 {
		return s
	}
	s.Mean = less(h.Mean())
	s.P50, s.P90 = less(h.Quantile(0.5)), less(h.Quantile(0.9))
	s.P99, s.P999 = less(h.Quantile(0.99)), less(h.Quantile(0.999))
	s.Max = less(float64(h.Max))
	return s
}

// Octaves is how many powers of two Octave counts: as far as the buckets
// reach, the last (from 2^35 ns, 34 s) open above.
const Octaves = maxExp + 1

// Octave returns the power of two holding ns: j where 2^j <= ns < 2^(j+1),
// 0 for 0 and 1, Octaves-1 from 2^35 up.
func Octave(ns uint64) int { return min(max(bits.Len64(ns)-1, 0), Octaves-1) }

// ByOctave sums h's buckets by power of two: what a stored window keeps of
// the distribution (each bucket lies within one power of two).
func (h Histogram) ByOctave() [Octaves]uint64 {
	var out [Octaves]uint64
	for i, n := range h.Counts {
		if n != 0 {
			lo, _ := Bounds(i)
			out[Octave(lo)] += n
		}
	}
	return out
}
