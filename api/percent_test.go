package api

import (
	"errors"
	"testing"
)

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float64{"10%": 0.10, "10": 0.10, " 2.5 % ": 0.025, "0%": 0} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "-5%", "NaN", "Inf%"} {
		if _, err := ParsePercent(in); !errors.Is(err, ErrBadPercent) {
			t.Errorf("ParsePercent(%q): %v, want ErrBadPercent", in, err)
		}
	}
	if got, _ := ParsePercent(formatPercent(0.15)); got != 0.15 {
		t.Errorf("formatPercent round trip: %v", got)
	}
}
