package top

import (
	"math"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{FmtNs(0, false), "-"},
		{FmtNs(55, true), "55 ns"},
		{FmtNs(999, true), "999 ns"},
		{FmtNs(1234, true), "1.23 µs"},
		{FmtNs(12_345, true), "12.3 µs"},
		{FmtNs(123_456, true), "123 µs"},
		{FmtNs(2_500_000, true), "2.50 ms"},
		{FmtNs(3e9, true), "3.00 s"},
		{FmtNs(math.NaN(), true), "-"},
		{FmtRate(0, true), "0"},
		{FmtRate(0.5, true), "0.5"},
		{FmtRate(42.4, true), "42"},
		{FmtRate(1500, true), "1.50k"},
		{FmtRate(2_345_678, true), "2.35M"},
		{FmtRate(7e9, true), "7.00G"},
		{FmtRate(math.Inf(1), true), "-"},
		{FmtPercent(0, true), "0.00%"},
		{FmtPercent(0.004, true), "<0.01%"},
		{FmtPercent(12.345, true), "12.35%"},
		{FmtPercent(1, false), "-"},
		{FmtFloat(1.234, true), "1.23"},
		{FmtFloat(2500, true), "2.50k"},
		{FmtBytes(512), "512 B"},
		{FmtBytes(2048), "2.0 KiB"},
		{FmtBytes(25 << 20), "25.0 MiB"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
