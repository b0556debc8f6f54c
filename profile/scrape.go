package profile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"
)

// Scrapes: profiles of the next N seconds cut out of the continuous
// sampler's stream, for Parca's and Pyroscope's pprof scrapes. Any number
// run at once on the perf events the continuous windows already hold; a
// scrape that spans the gap between two windows keeps the sampler running
// through it (Run samples the gap for scrapes only).

// sampleTap sees a sampler's samples while it captures.
type sampleTap interface {
	// drained gets the samples (and the count the kernel lost) that one
	// drain of c's rings added. It runs on the capture's goroutine.
	drained(c *Capture, fresh []Sample, lost uint64)
	// ended is called once c ends, with c.RunningShare set.
	ended(c *Capture)
	// pending says whether a scrape waits for samples: the capture
	// drains on its timer meanwhile (Sampler.mustPoll).
	pending() bool
	// wakeCapture receives when a scrape begins, so that a capture
	// sleeping until a ring fills starts draining on its timer.
	wakeCapture() <-chan struct{}
}

// scrapes are the scrapes in progress; the profiler's continuous sampler
// feeds them.
type scrapes struct {
	mu     sync.Mutex
	active map[*scrape]struct{}
	// wake tells Run, sleeping between windows, that a scrape began;
	// captureWake tells a capture.
	wake, captureWake chan struct{}
	stopped           error // why no sampler feeds scrapes any more; nil while Run runs
}

// scrape is one scrape: the samples whose time lies in [from, to).
type scrape struct {
	from, to uint64 // CLOCK_BOOTTIME ns, the clock of Sample.Time
	c        Capture
	// enabled and running add up the captures that fed the scrape, for
	// its running share.
	enabled, running float64
	done             chan struct{} // closed when a drain after `to` has run
	err              error         // set before done closes when Run stops
}

func newScrapes() *scrapes {
	return &scrapes{active: map[*scrape]struct{}{}, wake: make(chan struct{}, 1), captureWake: make(chan struct{}, 1), stopped: errNotRunning}
}

// errNotRunning: no continuous sampler runs to scrape.
var errNotRunning = fmt.Errorf("continuous profiling is not running: %w", ErrClosed)

func bootNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return uint64(ts.Nano())
}

// start registers a scrape of the next d, or fails when no sampler runs.
func (ss *scrapes) start(ev Capture, d time.Duration) (*scrape, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.stopped != nil {
		return nil, ss.stopped
	}
	now := bootNow()
	sc := &scrape{from: now, to: now + uint64(d), c: ev, done: make(chan struct{})}
	sc.c.Start, sc.c.Duration = time.Now(), d
	ss.active[sc] = struct{}{}
	for _, ch := range []chan struct{}{ss.wake, ss.captureWake} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return sc, nil
}

func (ss *scrapes) wakeCapture() <-chan struct{} { return ss.captureWake }

func (ss *scrapes) finish(sc *scrape) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.active, sc)
}

// pending says whether a scrape waits for samples.
func (ss *scrapes) pending() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for sc := range ss.active {
		if !closed(sc.done) {
			return true
		}
	}
	return false
}

// run marks the sampler running (err nil) or stopped, ending every
// scrape in progress with err.
func (ss *scrapes) run(err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.stopped = err
	if err == nil {
		return
	}
	for sc := range ss.active {
		if !closed(sc.done) {
			sc.err = err
			close(sc.done)
		}
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (ss *scrapes) drained(c *Capture, fresh []Sample, lost uint64) {
	now := bootNow()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for sc := range ss.active {
		if closed(sc.done) {
			continue
		}
		sc.c.Hz, sc.c.Period, sc.c.CPUs = c.Hz, c.Period, c.CPUs
		for _, smp := range fresh {
			if smp.Time >= sc.from && smp.Time < sc.to {
				sc.c.Samples = append(sc.c.Samples, smp)
			}
		}
		sc.c.Lost += lost
		if now >= sc.to {
			close(sc.done)
		}
	}
}

func (ss *scrapes) ended(c *Capture) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for sc := range ss.active {
		sc.c.Throttled += c.Throttled
		if c.RunningShare > 0 {
			sc.enabled += c.Duration.Seconds()
			sc.running += c.Duration.Seconds() * c.RunningShare
		}
	}
}

// Scrape profiles the next d on the main event, cut out of the samples the
// continuous windows take (Run), and blocks until d has passed: any number
// of scrapes share the running sampler, and none opens perf events of its
// own. Where continuous profiling does not run, it is an on-demand Capture
// (one at a time, ErrBusy otherwise). d must be within [MinDuration,
// MaxDuration].
func (p *Profiler) Scrape(ctx context.Context, d time.Duration) (*profile.Profile, error) {
	if err := CheckDuration(d, p.cfg.Sampler.MaxDuration); err != nil {
		return nil, err
	}
	sc, err := p.scrapes.start(Capture{Event: p.Event()}, d)
	if err != nil {
		return p.Capture(ctx, p.Event(), d)
	}
	defer p.scrapes.finish(sc)
	select {
	case <-sc.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("scrape: %w", ctx.Err())
	}
	p.scrapes.mu.Lock()
	c, err := sc.c, sc.err
	if sc.enabled > 0 {
		c.RunningShare = sc.running / sc.enabled
	}
	p.scrapes.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return Build(&c, p.sym, p.cfg.Build)
}
