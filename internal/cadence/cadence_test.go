package cadence

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	base := time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at    time.Duration // after base
		every time.Duration
		want  time.Duration
	}{
		{0, time.Second, time.Second}, // on an instant: the next one
		{300 * time.Millisecond, time.Second, 700 * time.Millisecond},
		{999 * time.Millisecond, time.Second, time.Millisecond},
		{2300 * time.Millisecond, 5 * time.Second, 2700 * time.Millisecond},
		{7 * time.Second, time.Minute, 53 * time.Second},
		{time.Second, 0, 0},
	} {
		if got := Until(base.Add(c.at), c.every); got != c.want {
			t.Errorf("Until(base+%v, %v) = %v, want %v", c.at, c.every, got, c.want)
		}
	}
}

// Jobs with different periods meet: a 5 s job's instants are among a
// 1 s job's, whenever each started.
func TestPeriodsMeet(t *testing.T) {
	start := time.Date(2026, 11, 28, 20, 0, 0, 123456789, time.UTC)
	oneSecond := map[time.Time]bool{}
	now := start
	for range 20 {
		now = now.Add(Until(now, time.Second))
		oneSecond[now] = true
	}
	now = start.Add(777 * time.Millisecond)
	for range 3 {
		now = now.Add(Until(now, 5*time.Second))
		if !oneSecond[now] {
			t.Errorf("the 5 s job wakes at %v, not with the 1 s job", now)
		}
	}
}

// A Ticker's ticks land on the multiples of its period, give or take
// the timer's lateness, and stop with Stop.
func TestTicker(t *testing.T) {
	const every = 100 * time.Millisecond
	tk := NewTicker(every)
	var late []time.Duration
	for range 5 {
		at := <-tk.C
		off := at.Sub(at.Truncate(every)) // how long after its instant
		late = append(late, off)
	}
	tk.Stop()
	// Three of five, not all: a loaded host makes a tick late. A plain
	// ticker is off by the same random share of the period each tick,
	// more than a quarter three times in four.
	near := 0
	for _, off := range late {
		if off < every/4 {
			near++
		}
	}
	if near < 3 {
		t.Errorf("ticks %v after their instants of %v: fewer than 3 of 5 within a quarter of the period", late, every)
	}
	select {
	case <-tk.C:
	default:
	}
	select {
	case at := <-tk.C:
		t.Errorf("a tick at %v after Stop", at)
	case <-time.After(2 * every):
	}
}
