package top

import (
	"math"
	"strconv"
)

// Units a person reads at a glance. Every formatter takes (value, ok) so a
// number that cannot be had prints as "-", never as 0.

// FmtNs prints a duration in nanoseconds as ns, µs, ms or s.
func FmtNs(ns float64, ok bool) string {
	if !ok || math.IsNaN(ns) || math.IsInf(ns, 0) {
		return "-"
	}
	switch a := math.Abs(ns); {
	case a >= 1e9:
		return trim(ns/1e9) + " s"
	case a >= 1e6:
		return trim(ns/1e6) + " ms"
	case a >= 1e3:
		return trim(ns/1e3) + " µs"
	default:
		return strconv.FormatFloat(ns, 'f', 0, 64) + " ns"
	}
}

// FmtRate prints a count per second with k, M or G.
func FmtRate(v float64, ok bool) string {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trim(v/1e9) + "G"
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	case a >= 10 || a == 0:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

// FmtPercent prints a percentage with two decimals; tiny non-zero values
// print as "<0.01%" so they do not look idle.
func FmtPercent(v float64, ok bool) string {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if v != 0 && math.Abs(v) < 0.01 {
		return "<0.01%"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "%"
}

// FmtFloat prints a ratio such as IPC or cycles/run with three significant
// digits.
func FmtFloat(v float64, ok bool) string {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if math.Abs(v) >= 1e3 {
		return FmtRate(v, true)
	}
	return trim(v)
}

// FmtBytes prints a size in B, KiB, MiB or GiB.
func FmtBytes(v int64) string {
	switch {
	case v >= 1<<30:
		return strconv.FormatFloat(float64(v)/(1<<30), 'f', 2, 64) + " GiB"
	case v >= 1<<20:
		return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64) + " MiB"
	case v >= 1<<10:
		return strconv.FormatFloat(float64(v)/(1<<10), 'f', 1, 64) + " KiB"
	default:
		return strconv.FormatInt(v, 10) + " B"
	}
}

// trim prints three significant digits: 1.23, 12.3, 123.
func trim(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
