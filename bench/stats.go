package bench

import (
	"math"
	"slices"
)

// Summary describes a series of measurements (ns per run).
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ns"`
	Mean   float64 `json:"mean_ns"`
	Min    float64 `json:"min_ns"`
	Max    float64 `json:"max_ns"`
	IQR    float64 `json:"iqr_ns"`
	Stddev float64 `json:"stddev_ns"`
	// CV is the coefficient of variation, stddev/mean, as a fraction.
	CV float64 `json:"cv"`
}

// Summarize computes the summary of xs. The standard deviation is the
// sample one (n-1); with fewer than two values it is 0.
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	s.Median = quantile(sorted, 0.5)
	s.IQR = quantile(sorted, 0.75) - quantile(sorted, 0.25)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	s.Mean = sum / float64(len(xs))
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.Stddev = math.Sqrt(ss / float64(len(xs)-1))
	}
	if s.Mean != 0 {
		s.CV = s.Stddev / s.Mean
	}
	return s
}

// quantile interpolates linearly between closest ranks (type 7, as R and
// NumPy do by default) in sorted.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	h := q * float64(len(sorted)-1)
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(sorted) {
		return sorted[i]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}
