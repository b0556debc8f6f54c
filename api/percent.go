package api

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrBadPercent means a percentage did not parse.
var ErrBadPercent = errors.New("not a percentage")

// ParsePercent reads "10%" (or "10") as 0.10. It refuses negative and
// non-finite values.
func ParsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%w: %q (want a number like 10%%)", ErrBadPercent, s)
	}
	return v / 100, nil
}

// formatPercent writes 0.10 as "10%", which ParsePercent reads back.
func formatPercent(v float64) string { return strconv.FormatFloat(100*v, 'g', -1, 64) + "%" }
