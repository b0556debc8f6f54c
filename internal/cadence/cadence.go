// Package cadence puts a process's periodic work on shared instants:
// whole multiples of each period on the wall clock. An idle Go process
// pays for each distinct moment it wakes (the runtime's monitor thread
// polls around it), not for each timer: jobs due at the same instant
// run in one wake-up. A 5 s job on this cadence wakes with every fifth
// tick of a 1 s one, instead of at a moment of its own.
package cadence

import (
	"sync"
	"time"
)

// Until is how long from now to the next whole multiple of every since
// the Unix epoch (every itself at most). Computed afresh each time, it
// follows the wall clock's steps: a period never stretches past every.
func Until(now time.Time, every time.Duration) time.Duration {
	if every <= 0 {
		return 0
	}
	next := now.Truncate(every).Add(every)
	return next.Sub(now.Round(0))
}

// Ticker is a time.Ticker that ticks at each whole multiple of its
// period: the first tick comes at the next one, in every or less. Like
// time.Ticker's, a tick its reader is not ready for is dropped.
type Ticker struct {
	C <-chan time.Time

	c     chan time.Time
	every time.Duration
	mu    sync.Mutex
	timer *time.Timer
	done  bool
}

// NewTicker ticks at the multiples of every. Like time.NewTicker, it
// panics when every is not positive (a zero period would spin).
func NewTicker(every time.Duration) *Ticker {
	if every <= 0 {
		panic("cadence: non-positive period for NewTicker")
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, c: c, every: every}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = time.AfterFunc(Until(time.Now(), every), t.tick)
	return t
}

func (t *Ticker) tick() {
	now := time.Now()
	select {
	case t.c <- now:
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.timer.Reset(Until(now, t.every))
	}
}

// Stop stops the ticks; C is not closed.
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	t.timer.Stop()
}
