package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads a point in time as RFC 3339, a duration back from now
// ("90m", "2h"), a number of days ("7d"), or "now". The CLI's --since and
// --until and the API's since and until share it.
func ParseTime(v string, now time.Time) (time.Time, error) {
	if v == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor a duration like 1h or 7d", v)
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("%q: a duration back from now must not be negative", v)
	}
	return now.Add(-d), nil
}

// ParseDuration is time.ParseDuration plus a "d" (24h) suffix.
func ParseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", v)
		}
		ns := n * float64(24*time.Hour)
		// Beyond ±292 years a Duration wraps around (1e308d read as
		// -2562047h): refuse it rather than go back in time.
		if math.IsNaN(ns) || math.Abs(ns) >= math.MaxInt64 {
			return 0, fmt.Errorf("duration %q is out of range (at most about 106,000d)", v)
		}
		return time.Duration(ns), nil
	}
	return time.ParseDuration(v)
}
