package api

import (
	"strings"
	"testing"
	"time"
)

func TestStaleAfter(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{200 * time.Millisecond, 10 * time.Second},
		{time.Second, 10 * time.Second},
		{5 * time.Second, 50 * time.Second},
	} {
		if got := StaleAfter(c.interval); got != c.want {
			t.Errorf("StaleAfter(%v) = %v, want %v", c.interval, got, c.want)
		}
	}
}

func TestHealth(t *testing.T) {
	start := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	s := Status{StartedAt: start, IntervalMs: 2000}
	for _, c := range []struct {
		name    string
		last    time.Duration // after start; <0: no tick yet
		now     time.Duration // after start
		maxAge  time.Duration
		ok      bool
		want    string
		wantNot string
	}{
		{"fresh", 60 * time.Second, 61 * time.Second, 0, true, "ok: last tick 1s ago (stale after 20s: 10 intervals of 2s, at least 10s)", ""},
		{"at the bound", 60 * time.Second, 80 * time.Second, 0, true, "ok: last tick 20s ago", ""},
		{"past the bound", 60 * time.Second, 80*time.Second + time.Millisecond, 0, false, "sampler stalled: last tick 20s ago, at ", "ok"},
		{"long stalled", 60 * time.Second, 150 * time.Second, 0, false, "last tick 1m30s ago", ""},
		{"store stuck", 60 * time.Second, 90 * time.Second, 0, false, "programs are not read; the store has not answered a read for 25.5s (a write stuck in the kernel", ""},
		{"max-age", 60 * time.Second, 65 * time.Second, 3 * time.Second, false, "(stale after 3s: --max-age)", ""},
		{"starting", -1, 5 * time.Second, 0, false, "sampler not started: no tick yet, 5s after bpfperfd started", ""},
		// A tick stamped after the reader's now (clocks a hair apart).
		{"tick after now", 60 * time.Second, 59 * time.Second, 0, true, "ok: last tick 0s ago", ""},
	} {
		s := s
		if c.name == "store stuck" {
			s.StoreUnansweredSeconds = 25.49
		}
		if c.last >= 0 {
			s.LastSample = start.Add(c.last)
		}
		ok, line := Health(s, start.Add(c.now), c.maxAge)
		if ok != c.ok || !strings.Contains(line, c.want) || (c.wantNot != "" && strings.HasPrefix(line, c.wantNot)) || strings.Contains(line, "\n") {
			t.Errorf("%s: %v %q, want %v and %q", c.name, ok, line, c.ok, c.want)
		}
	}
}
