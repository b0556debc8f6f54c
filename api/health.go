package api

import (
	"fmt"
	"time"
)

// Stale bounds: a sampler whose last tick is older than StaleTicks
// intervals, and older than StaleFloor, has stopped. Ten intervals let a
// tick run long (a minute's rollup, a slow disk's fsync) without a false
// alarm; the floor keeps short intervals from calling a few seconds' stall
// a hang. A liveness probe adds its own failure threshold on top.
const (
	StaleTicks = 10
	StaleFloor = 10 * time.Second
)

// StaleAfter is how old the last tick may be for a daemon sampling every
// interval: StaleTicks intervals, at least StaleFloor.
func StaleAfter(interval time.Duration) time.Duration {
	return max(StaleTicks*interval, StaleFloor)
}

// Health says whether s's sampler ticks at now, with one line saying so or
// what is wrong: its last tick (s.LastSample) is at most maxAge old (0:
// StaleAfter(s's interval)). Before the first tick it is not healthy yet:
// the first tick stores every program once and may take a while on a
// large host, which a start-up check allows for, not the bound.
//
// Status answers as long as the API does, a hung sampler or not: this is
// the check that tells them apart.
func Health(s Status, now time.Time, maxAge time.Duration) (ok bool, line string) {
	interval := time.Duration(s.IntervalMs) * time.Millisecond
	rule := fmt.Sprintf("%d intervals of %v, at least %v", StaleTicks, interval, StaleFloor)
	if maxAge <= 0 {
		maxAge = StaleAfter(interval)
	} else {
		rule = "--max-age"
	}
	bound := fmt.Sprintf("stale after %v: %s", maxAge, rule)
	if s.LastSample.IsZero() {
		return false, fmt.Sprintf("sampler not started: no tick yet, %v after bpfperfd started", round(now.Sub(s.StartedAt)))
	}
	age := now.Sub(s.LastSample)
	if age > maxAge {
		line := fmt.Sprintf("sampler stalled: last tick %v ago, at %s (%s); the API still answers, but programs are not read", round(age), s.LastSample.Local().Format(time.RFC3339), bound)
		if s.StoreUnansweredSeconds > 0 {
			// The likely cause: the tick's write waits on the disk.
			line += fmt.Sprintf("; the store has not answered a read for %v (a write stuck in the kernel: frozen or hung disk?)", round(time.Duration(s.StoreUnansweredSeconds*float64(time.Second))))
		}
		return false, line
	}
	return true, fmt.Sprintf("ok: last tick %v ago (%s)", round(max(age, 0)), bound)
}

// round keeps a second's tenths for ages under a minute, whole seconds
// above.
func round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
