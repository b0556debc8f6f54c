package api

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseTime: any --since/--until/--from text either parses to a time
// or fails with words; none panics, and no duration changes sign (1e308d
// once read as 292 years back in the future).
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"7d", "1h30m", "now", "2026-11-23T10:00:00Z", "2026-11-23", "-5m", "1e308d", "9223372036854775807s", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := ParseTime(s, now); err != nil && err.Error() == "" {
			t.Fatal("an error with no words")
		}
		d, err := ParseDuration(s)
		if err == nil && (d < 0) != strings.HasPrefix(s, "-") && d != 0 {
			t.Fatalf("ParseDuration(%q) = %v: negative", s, d)
		}
	})
}
