package daemon

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/store"
)

// Per-program perf counters (issue 5).
//
// Exact counting (collectors.ExactCounters: fentry/fexit around every run)
// runs in bounded windows: a target is counted for Window, every Every,
// and held by nothing in between. One goroutine (the counter loop) owns
// every window; API calls and the sampler hand it work. Each window's
// totals are stored as a counter series (store.CounterSample): a sample
// when the window opens and one when it closes.
//
// The sampled mechanism (counters_sampled.go) estimates the same per-run
// figures from the continuous profile windows; a program's row shows the
// newer of its exact and sampled windows, naming the mechanism.

// counting is the daemon's counters state. Its zero value takes targets
// from the sampler before startCounters runs.
type counting struct {
	mu      sync.Mutex
	cfg     CountersConfig
	started bool
	support collectors.CounterSupport
	exact   *collectors.ExactCounters // nil when exact counting cannot run
	events  []perfevent.Event
	targets map[uint32]*counterTarget
	// pending are programs the sampler matched, for the loop to pick up.
	pending []*counterTarget
	reqs    chan counterRequest
	wake    chan struct{}
	// smp is the sampled mechanism (counters_sampled.go).
	smp sampling
}

// counterTarget is the loop's state of one target. Only the loop changes
// it, under counting.mu; others read under counting.mu.
type counterTarget struct {
	key     store.InstanceKey
	name    string
	source  string
	window  time.Duration
	waiting bool
	failed  string // reason; a failed target is not retried
	next    time.Time
	w       *collectors.CounterWindow
	wStart  time.Time
	cum     *store.CounterSample // cumulative over windows; nil until loaded from the store
	last    *api.PerfCounters
	windows int
}

type counterRequest struct {
	enable bool
	inst   instance
	window time.Duration
	reply  chan counterReply
}

type counterReply struct {
	target api.CounterTarget
	err    error
}

const (
	sourceEnabled = "enabled"
	sourceFlag    = "--counters.programs"
	// The exact mechanism's own programs, which the sweep sees while a
	// window is open.
	countersEntryName = "counters_entry"
	countersExitName  = "counters_exit"
)

// startCounters probes the mechanisms and starts the counter loop. It
// fails only for bad flags; a kernel that cannot count is a state that
// status reports.
func (d *Daemon) startCounters(ctx context.Context) error {
	cfg := d.cfg.Counters.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	support := collectors.ProbeCounters()
	events := support.Events
	if len(events) == 0 {
		events = []perfevent.Event{perfevent.CPUClock}
	}
	var exact *collectors.ExactCounters
	if support.Exact == nil {
		var err error
		exact, err = collectors.NewExactCounters(collectors.ExactConfig{Events: events, MaxTargets: cfg.Max, ProcRoot: d.cfg.ProcRoot})
		if err != nil {
			support.Exact = err
		}
	}
	c := &d.ctr
	c.mu.Lock()
	c.cfg, c.support, c.exact, c.events, c.started = cfg, support, exact, events, true
	c.reqs = make(chan counterRequest)
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	c.mu.Unlock()
	log := d.cfg.Logger
	if support.Exact != nil {
		log.Info("exact perf counters unavailable", "reason", counterReason(support.Exact), "err", support.Exact)
	}
	if support.PMU != nil {
		log.Info("no hardware PMU: cycles, instructions and LLC misses are absent", "err", support.PMU)
	}
	go d.counterLoop(ctx)
	return nil
}

// counterProgramAppeared lets counting match a new program against
// --counters.programs. Called under the sampler's lock: it only queues.
func (d *Daemon) counterProgramAppeared(id uint32, name string) {
	if len(d.cfg.Counters.Programs) == 0 || name == countersEntryName || name == countersExitName {
		return
	}
	for _, g := range d.cfg.Counters.Programs {
		if ok, _ := path.Match(g, name); ok {
			c := &d.ctr
			c.mu.Lock()
			c.pending = append(c.pending, &counterTarget{key: store.InstanceKey{Boot: d.boot, ID: id}, name: name, source: sourceFlag})
			if c.wake == nil {
				c.wake = make(chan struct{}, 1)
			}
			c.mu.Unlock()
			c.poke()
			return
		}
	}
}

func (c *counting) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// counterLoop owns every counting window: it opens due ones, stores and
// closes finished ones, and serves enable/disable. When ctx ends it stops
// every window and stores what they counted.
func (d *Daemon) counterLoop(ctx context.Context) {
	c := &d.ctr
	t := time.NewTicker(counterPoll)
	defer t.Stop()
	for {
		d.counterPass(d.now())
		// Poll only while there are targets: with none, nothing is due
		// until a request or a matched program wakes the loop, and an idle
		// daemon should not wake five times a second for nothing.
		var poll <-chan time.Time
		if c.hasTargets() {
			t.Reset(counterPoll)
			poll = t.C
		} else {
			t.Stop()
		}
		select {
		case <-ctx.Done():
			c.mu.Lock()
			var open []*counterTarget
			for _, tg := range c.targets {
				if tg.w != nil {
					open = append(open, tg)
				}
			}
			c.mu.Unlock()
			for _, tg := range open {
				tg.w.Stop()
				d.finishWindow(tg, d.now())
			}
			return
		case req := <-c.reqs:
			req.reply <- d.counterRequest(req)
		case <-c.wake:
		case <-poll:
		}
	}
}

// counterPoll is how often the counter loop looks for finished and due
// windows while it has targets.
const counterPoll = 200 * time.Millisecond

// hasTargets says whether the loop has targets or matched programs to take.
func (c *counting) hasTargets() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.targets) > 0 || len(c.pending) > 0
}

// counterPass takes in matched programs, closes finished windows, drops
// targets whose program went away and opens due windows.
func (d *Daemon) counterPass(now time.Time) {
	c := &d.ctr
	c.mu.Lock()
	if c.targets == nil {
		c.targets = map[uint32]*counterTarget{}
	}
	for _, tg := range c.pending {
		if _, ok := c.targets[tg.key.ID]; !ok {
			tg.window, tg.next = c.cfg.Window, now
			tg.waiting = c.inSlots() >= c.cfg.Max
			c.targets[tg.key.ID] = tg
		}
	}
	c.pending = nil
	var finished, idle []*counterTarget
	for _, tg := range c.targets {
		switch {
		case tg.w != nil && tg.w.Stopped() != collectors.StopNone:
			finished = append(finished, tg)
		case tg.w == nil:
			idle = append(idle, tg)
		}
	}
	c.mu.Unlock()

	for _, tg := range finished {
		d.finishWindow(tg, now)
	}
	// Targets whose program went away are dropped, never reopened.
	alive := d.loadedInstances(idle)
	for _, tg := range idle {
		if !alive[tg.key] {
			d.dropTarget(tg, "unloaded")
			continue
		}
		c.mu.Lock()
		if tg.waiting && c.inSlots() < c.cfg.Max {
			tg.waiting = false
		}
		due := !tg.waiting && tg.failed == "" && !tg.next.After(now) && c.targets[tg.key.ID] == tg
		c.mu.Unlock()
		if due {
			d.openWindow(tg, now)
		}
	}
}

// inSlots counts targets holding one of --counters.max slots: all but the
// waiting and the failed ones. Called with c.mu held.
func (c *counting) inSlots() int {
	n := 0
	for _, tg := range c.targets {
		if !tg.waiting && tg.failed == "" {
			n++
		}
	}
	return n
}

// loadedInstances reports which of the targets' instances the sampler
// sees loaded now.
func (d *Daemon) loadedInstances(tgs []*counterTarget) map[store.InstanceKey]bool {
	out := make(map[store.InstanceKey]bool, len(tgs))
	if len(tgs) == 0 {
		return out
	}
	d.sampler.Read(func(v sampler.View) {
		for _, tg := range tgs {
			if v.Live(tg.key) != nil {
				out[tg.key] = true
			}
		}
	})
	return out
}

// openWindow starts counting tg, or marks it failed with the reason. A
// target gone from the kernel is dropped.
func (d *Daemon) openWindow(tg *counterTarget, now time.Time) error {
	c := &d.ctr
	if c.exact == nil {
		err := fmt.Errorf("%w: %s", ErrCountersUnavailable, counterReasonDetail(c.support.Exact))
		c.mu.Lock()
		tg.failed = counterReason(c.support.Exact)
		c.mu.Unlock()
		return err
	}
	if tg.cum == nil {
		cum, ok, err := d.store.LastCountersOf(tg.key, store.CounterExact)
		if err != nil {
			d.cfg.Logger.Warn("read stored perf counters", "id", tg.key.ID, "err", err)
		}
		if !ok || err != nil {
			cum = store.CounterSample{Key: tg.key, Mechanism: store.CounterExact}
		}
		tg.cum = &cum
	}
	w, err := c.exact.Start(tg.key.ID, tg.window)
	if err != nil {
		if errors.Is(err, collectors.ErrGone) {
			d.dropTarget(tg, "unloaded")
			return err
		}
		c.mu.Lock()
		tg.failed = counterReason(err)
		c.mu.Unlock()
		d.cfg.Logger.Warn("perf counters: cannot count program", "id", tg.key.ID, "name", tg.name, "reason", tg.failed, "err", err)
		return err
	}
	// The open sample marks every event the window counts as present:
	// its cumulative value is where this window's counts start.
	open := *tg.cum
	open.Time, open.Present = now, 0
	for _, e := range c.events {
		open.Present |= 1 << e
	}
	if err := d.store.WriteCounters(open); err != nil {
		d.cfg.Logger.Warn("store perf counters", "id", tg.key.ID, "err", err)
	}
	c.mu.Lock()
	tg.w, tg.wStart, tg.next = w, now, now.Add(d.ctr.cfg.Every)
	c.mu.Unlock()
	return nil
}

// finishWindow reads a stopped (or stopping) window, stores its totals,
// frees it, and drops the target if its owner let it go.
func (d *Daemon) finishWindow(tg *counterTarget, now time.Time) {
	c := &d.ctr
	w := tg.w
	w.Stop()
	r, err := w.Read()
	w.Close()
	reason := w.Stopped()
	var pc *api.PerfCounters
	if err != nil {
		d.cfg.Logger.Warn("read perf counters", "id", tg.key.ID, "err", err)
	} else {
		pc = windowCounters(r, tg.wStart, now, reason)
		closed := *tg.cum
		closed.Time = now
		closed.Counted += r.Counted
		closed.Entries += r.Entries
		closed.Present = 0
		for _, v := range r.Values {
			if n, ok := v.Scaled(); ok && int(v.Event) < store.CounterEvents {
				closed.Present |= 1 << v.Event
				closed.Values[v.Event] += uint64(n + 0.5)
			}
		}
		if err := d.store.WriteCounters(closed); err != nil {
			d.cfg.Logger.Warn("store perf counters", "id", tg.key.ID, "err", err)
		}
		tg.cum = &closed
	}
	c.mu.Lock()
	tg.w = nil
	if pc != nil {
		tg.last = pc
		tg.windows++
	}
	c.mu.Unlock()
	if reason == collectors.StopReleased {
		d.dropTarget(tg, string(reason))
	}
}

func (d *Daemon) dropTarget(tg *counterTarget, why string) {
	c := &d.ctr
	c.mu.Lock()
	if c.targets[tg.key.ID] == tg {
		delete(c.targets, tg.key.ID)
	}
	c.mu.Unlock()
	d.cfg.Logger.Debug("perf counters: target dropped", "id", tg.key.ID, "name", tg.name, "why", why)
	c.poke() // a slot may have freed up
}

// counterRequest serves enable and disable in the loop.
func (d *Daemon) counterRequest(req counterRequest) counterReply {
	c := &d.ctr
	id := req.inst.rec.ID
	c.mu.Lock()
	tg := c.targets[id]
	if tg != nil && tg.key != req.inst.rec.Key {
		tg = nil // an old instance's id, reused
	}
	if !req.enable {
		if tg == nil {
			c.mu.Unlock()
			return counterReply{err: fmt.Errorf("%w: program %q (id %d) is not being counted", ErrBadRequest, req.inst.rec.Name, id)}
		}
		delete(c.targets, id)
		c.mu.Unlock()
		if tg.w != nil {
			d.finishWindow(tg, d.now())
		}
		c.mu.Lock()
		view := c.view(tg)
		c.mu.Unlock()
		view.State = "disabled"
		c.poke()
		return counterReply{target: view}
	}
	if c.exact == nil {
		c.mu.Unlock()
		return counterReply{err: fmt.Errorf("%w: %s", ErrCountersUnavailable, counterReasonDetail(c.support.Exact))}
	}
	if tg == nil {
		tg = &counterTarget{key: req.inst.rec.Key, name: req.inst.rec.Name}
	}
	tg.source = sourceEnabled
	if req.window > 0 {
		tg.window = req.window
	} else if tg.window == 0 {
		tg.window = c.cfg.Window
	}
	if tg.w != nil || (c.targets[id] == tg && !tg.waiting && tg.failed == "") {
		// Counting already; the new window applies from the next one.
		view := c.view(tg)
		c.mu.Unlock()
		return counterReply{target: view}
	}
	if n := c.inSlots(); (c.targets[id] != tg || tg.waiting || tg.failed != "") && n >= c.cfg.Max {
		c.mu.Unlock()
		return counterReply{err: &collectors.CounterError{Op: fmt.Sprintf("count program %q (id %d)", req.inst.rec.Name, id), Reason: collectors.ErrTooManyTargets,
			Err: fmt.Errorf("%d of %d targets enabled (--counters.max); disable one first", n, c.cfg.Max)}}
	}
	tg.waiting, tg.failed = false, ""
	c.targets[id] = tg
	c.mu.Unlock()
	if err := d.openWindow(tg, d.now()); err != nil {
		c.mu.Lock()
		if c.targets[id] == tg {
			delete(c.targets, id)
		}
		c.mu.Unlock()
		return counterReply{err: fmt.Errorf("count program %q (id %d): %s", req.inst.rec.Name, id, counterReasonDetail(err))}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return counterReply{target: c.view(tg)}
}

// do hands a request to the counter loop and waits for its answer.
func (c *counting) do(ctx context.Context, req counterRequest) (api.CounterTarget, error) {
	c.mu.Lock()
	reqs, started := c.reqs, c.started
	c.mu.Unlock()
	if !started {
		return api.CounterTarget{}, fmt.Errorf("%w: the daemon has not started counting yet", ErrCountersUnavailable)
	}
	req.reply = make(chan counterReply, 1)
	select {
	case reqs <- req:
	case <-ctx.Done():
		return api.CounterTarget{}, ctx.Err()
	}
	select {
	case rep := <-req.reply:
		return rep.target, rep.err
	case <-ctx.Done():
		return api.CounterTarget{}, ctx.Err()
	}
}

// view is a target as the API shows it. Called with c.mu held.
func (c *counting) view(tg *counterTarget) api.CounterTarget {
	v := api.CounterTarget{ID: tg.key.ID, Name: tg.name, Source: tg.source, WindowMs: tg.window.Milliseconds(), Windows: tg.windows, Last: tg.last}
	switch {
	case tg.w != nil:
		v.State = "counting"
	case tg.waiting:
		v.State, v.Reason = "waiting", fmt.Sprintf("too many targets (%d of %d)", c.inSlots(), c.cfg.Max)
	case tg.failed != "":
		v.State, v.Reason = "failed", tg.failed
	default:
		v.State, v.Next = "idle", tg.next
	}
	return v
}

func (c *counting) openWindows() int {
	n := 0
	for _, tg := range c.targets {
		if tg.w != nil {
			n++
		}
	}
	return n
}
