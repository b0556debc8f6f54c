// Package counters is the daemon's perf counters room (issue 5).
//
// Exact counting (collectors.ExactCounters: fentry/fexit around every run)
// runs in bounded windows: a target is counted for Window, every Every,
// and held by nothing in between. One goroutine (the counter loop) owns
// every window; API calls and the sampler hand it work. Each window's
// totals are stored as a counter series (store.CounterSample): a sample
// when the window opens and one when it closes. The loop wakes only when
// something is to be done: a request, a matched program, a window that
// stopped, a window due, or a sampler tick that saw programs come or go
// while a target holds no window.
//
// The sampled mechanism (sampled.go) estimates the same per-run figures
// from the continuous profile windows; a program's row shows the newer of
// its exact and sampled windows, naming the mechanism.
package counters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/store"
)

// Deps are what counting reads: the sampler's programs and ticks, the
// profiler's windows, the store, and the daemon's clock and boot.
type Deps struct {
	Sampler  *sampler.Sampler
	Profiler *profiling.Profiling
	Store    *store.DB
	Logger   *slog.Logger
	Now      func() time.Time
	Boot     uint32
	ProcRoot string
	// Interval is the sampling interval: a window's edge waits for the
	// first sweep after it, at most two intervals and a second.
	Interval time.Duration
}

// Counters is the daemon's counters state. It takes targets from the
// sampler (Appeared) before Start runs.
type Counters struct {
	sampler  *sampler.Sampler
	prof     *profiling.Profiling
	store    *store.DB
	log      *slog.Logger
	now      func() time.Time
	boot     uint32
	procRoot string
	interval time.Duration
	flags    Config // as given; cfg is with defaults, from Start on
	// loop is the counter loop, for Wait.
	loop sync.WaitGroup

	mu      sync.Mutex
	cfg     Config
	started bool
	support collectors.CounterSupport
	exact   exactCounter // nil when exact counting cannot run
	// reprobe probes exact counting again (Start sets it); probedAt is
	// when it last did. Only the loop writes exact, under mu.
	reprobe  func() (exactCounter, error)
	probedAt time.Time
	events   []perfevent.Event
	targets  map[uint32]*counterTarget
	// pending are programs the sampler matched, for the loop to pick up.
	pending []*counterTarget
	reqs    chan counterRequest
	wake    chan struct{}
	// smp is the sampled mechanism (sampled.go).
	smp sampling
}

// New makes counting for the programs flags names, started by Start.
func New(flags Config, deps Deps) *Counters {
	return &Counters{
		sampler: deps.Sampler, prof: deps.Profiler, store: deps.Store, log: deps.Logger, now: deps.Now,
		boot: deps.Boot, procRoot: deps.ProcRoot, interval: deps.Interval, flags: flags,
	}
}

// Wait waits, once Start's ctx is done, for the counter loop to have
// stored what its open windows counted.
func (c *Counters) Wait() { c.loop.Wait() }

// exactCounter is collectors.ExactCounters as the loop uses it, so that
// a test can count with windows it stops by hand.
type exactCounter interface {
	Start(target uint32, window time.Duration) (counterWindow, error)
}

// counterWindow is a collectors.CounterWindow as the loop uses it.
type counterWindow interface {
	Done() <-chan struct{}
	Stopped() collectors.StopReason
	Stop()
	Read() (collectors.CounterReading, error)
	Close() error
}

var _ counterWindow = (*collectors.CounterWindow)(nil)

// exactCounters is the real exact mechanism.
type exactCounters struct{ *collectors.ExactCounters }

func (e exactCounters) Start(target uint32, window time.Duration) (counterWindow, error) {
	w, err := e.ExactCounters.Start(target, window)
	if err != nil {
		return nil, err // not a nil *CounterWindow in a non-nil interface
	}
	return w, nil
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
	w       counterWindow
	wStart  time.Time
	cum     *store.CounterSample // cumulative over windows; nil until loaded from the store
	last    *api.PerfCounters
	windows int
}

type counterRequest struct {
	enable bool
	key    store.InstanceKey
	name   string
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

// Start probes the mechanisms and starts the counter loop until ctx is
// done. It fails only for bad flags; a kernel that cannot count is a
// state that status reports.
func (c *Counters) Start(ctx context.Context) error {
	cfg := c.flags.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	support := collectors.ProbeCounters()
	events := support.Events
	if len(events) == 0 {
		events = []perfevent.Event{perfevent.CPUClock}
	}
	newExact := func() (exactCounter, error) {
		ec, err := collectors.NewExactCounters(collectors.ExactConfig{Events: events, MaxTargets: cfg.Max, ProcRoot: c.procRoot})
		if err != nil {
			return nil, err
		}
		return exactCounters{ec}, nil
	}
	var exact exactCounter
	if support.Exact == nil {
		exact, support.Exact = newExact()
	}
	c.reprobe = func() (exactCounter, error) {
		if err := collectors.ProbeExact(); err != nil {
			return nil, err
		}
		return newExact()
	}
	log := c.log
	if support.Exact != nil {
		log.Info("exact perf counters unavailable", "reason", counterReason(support.Exact), "err", support.Exact)
	}
	if support.PMU != nil {
		log.Info("no hardware PMU: cycles, instructions and LLC misses are absent", "err", support.PMU)
	}
	c.run(ctx, cfg, support, exact, events)
	return nil
}

// run takes what Start probed and starts the counter loop until ctx is
// done. Tests start it with a fake exact mechanism.
func (c *Counters) run(ctx context.Context, cfg Config, support collectors.CounterSupport, exact exactCounter, events []perfevent.Event) {
	c.mu.Lock()
	c.cfg, c.support, c.exact, c.events, c.started = cfg, support, exact, events, true
	c.reqs = make(chan counterRequest)
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	c.mu.Unlock()
	c.loop.Go(func() { c.counterLoop(ctx) })
}

// Appeared lets counting match a new program against --counters.programs.
// Called under the sampler's lock: it only queues.
func (c *Counters) Appeared(id uint32, name string) {
	if len(c.flags.Programs) == 0 || name == countersEntryName || name == countersExitName {
		return
	}
	for _, g := range c.flags.Programs {
		if ok, _ := path.Match(g, name); ok {
			c.mu.Lock()
			c.pending = append(c.pending, &counterTarget{key: store.InstanceKey{Boot: c.boot, ID: id}, name: name, source: sourceFlag})
			if c.wake == nil {
				c.wake = make(chan struct{}, 1)
			}
			c.mu.Unlock()
			c.poke()
			return
		}
	}
}

func (c *Counters) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// counterLoop owns every counting window: it opens due ones, stores and
// closes finished ones, and serves enable/disable. When ctx ends it stops
// every window and stores what they counted.
//
// It polls nothing: it sleeps until a request, a poke (a matched program,
// a dropped target, a window that stopped: openWindow's watch), the
// earliest due window, or, while a target holds no window, a sampler tick
// that saw programs come or go. An idle daemon with no targets sleeps
// until a request or a matched program wakes it.
func (c *Counters) counterLoop(ctx context.Context) {
	due := time.NewTimer(0)
	due.Stop()
	defer due.Stop()
	var unloads unloadWatch
	defer unloads.stop()
	for {
		w := c.counterPass(ctx, c.now())
		var dueC <-chan time.Time
		if !w.due.IsZero() {
			due.Reset(w.due.Sub(c.now()))
			dueC = due.C
		} else {
			due.Stop()
		}
		if w.idle {
			unloads.start(ctx, c, w.seen)
		} else {
			unloads.stop()
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
				c.finishWindow(tg, c.now())
			}
			return
		case req := <-c.reqs:
			req.reply <- c.counterRequest(ctx, req)
		case <-c.wake:
		case <-dueC:
		case <-unloads.moved:
			unloads.stop()
		}
	}
}

// passWait is what the loop waits for after a pass, besides requests and
// pokes.
type passWait struct {
	due  time.Time // the earliest next window of a target that can open one; zero for none
	idle bool      // some target holds no window: its program's unload is the loop's to see
	seen sweepMark // the sampler as the pass saw it
}

// sweepMark is the sampler's state at one Read: its last tick and
// generation, which moves when a program comes or goes.
type sweepMark struct {
	tick time.Time
	gen  uint64
}

// unloadWatch is the loop's watch for programs going away: a goroutine
// (watchUnloads) that closes moved after the first sampler tick that saw
// programs come or go. Only the loop uses it.
type unloadWatch struct {
	moved  chan struct{} // nil while none runs
	cancel context.CancelFunc
}

// start starts a watch from seen, unless one runs: one started at an
// earlier pass saw the sampler no later, so it fires no later.
func (u *unloadWatch) start(ctx context.Context, c *Counters, seen sweepMark) {
	if u.moved != nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	u.moved, u.cancel = make(chan struct{}), cancel
	go c.watchUnloads(wctx, seen, u.moved)
}

// stop ends the watch, if one runs.
func (u *unloadWatch) stop() {
	if u.moved != nil {
		u.cancel()
		u.moved, u.cancel = nil, nil
	}
}

// watchUnloads closes moved after the first sampler tick whose programs
// differ from seen's (the generation moved): an idle target's program may
// be gone. It returns without closing moved when ctx ends.
func (c *Counters) watchUnloads(ctx context.Context, seen sweepMark, moved chan<- struct{}) {
	for {
		// WaitTick wants a bound; past it, there is nothing to do but
		// wait again.
		if !c.sampler.WaitTick(ctx, seen.tick, time.Hour) {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		var now sweepMark
		c.sampler.Read(func(v sampler.View) { now = sweepMark{v.LastTick(), v.Generation()} })
		if now.gen != seen.gen {
			close(moved)
			return
		}
		seen.tick = now.tick
	}
}

// counterPass takes in matched programs, closes finished windows, drops
// targets whose program went away and opens due windows. It returns what
// the loop waits for next.
func (c *Counters) counterPass(ctx context.Context, now time.Time) passWait {
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
	var finished []*counterTarget
	for _, tg := range c.targets {
		if tg.w != nil && tg.w.Stopped() != collectors.StopNone {
			finished = append(finished, tg)
		}
	}
	c.mu.Unlock()

	for _, tg := range finished {
		c.finishWindow(tg, now)
	}
	// Idle targets are taken after the finished windows, so that each
	// target holding no window after this pass was seen loaded at seen:
	// the unload watch starts from there.
	c.mu.Lock()
	var idle []*counterTarget
	for _, tg := range c.targets {
		if tg.w == nil {
			idle = append(idle, tg)
		}
	}
	c.mu.Unlock()
	// Targets that failed for a shortage at start are due again once a
	// probe passes.
	if c.exact == nil && c.failedShort() {
		c.retryExact(now)
	}
	// Targets whose program went away are dropped, never reopened.
	alive, seen := c.loadedInstances(idle)
	for _, tg := range idle {
		if !alive[tg.key] {
			c.dropTarget(tg, "unloaded")
			continue
		}
		c.mu.Lock()
		if tg.waiting && c.inSlots() < c.cfg.Max {
			tg.waiting = false
		}
		due := !tg.waiting && tg.failed == "" && !tg.next.After(now) && c.targets[tg.key.ID] == tg
		c.mu.Unlock()
		if due {
			c.openWindow(ctx, tg, now)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	w := passWait{seen: seen}
	for _, tg := range c.targets {
		if tg.w != nil {
			continue
		}
		w.idle = true
		// A waiting target waits for a slot, which frees with a poke
		// (dropTarget, a disable, a failure), not at a time.
		if !tg.waiting && tg.failed == "" && (w.due.IsZero() || tg.next.Before(w.due)) {
			w.due = tg.next
		}
	}
	// And the next probe, where targets failed for a shortage.
	if c.exact == nil && c.reprobe != nil && c.failedShortLocked() {
		if retry := c.probedAt.Add(reprobeGap); w.due.IsZero() || retry.Before(w.due) {
			w.due = retry
		}
	}
	return w
}

// failedShort says whether a target failed because exact counting was
// short of a resource.
func (c *Counters) failedShort() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failedShortLocked()
}

func (c *Counters) failedShortLocked() bool {
	if !shortage(c.support.Exact) {
		return false
	}
	reason := counterReason(c.support.Exact)
	for _, tg := range c.targets {
		if tg.failed == reason {
			return true
		}
	}
	return false
}

// inSlots counts targets holding one of --counters.max slots: all but the
// waiting and the failed ones. Called with c.mu held.
func (c *Counters) inSlots() int {
	n := 0
	for _, tg := range c.targets {
		if !tg.waiting && tg.failed == "" {
			n++
		}
	}
	return n
}

// loadedInstances reports which of the targets' instances the sampler
// sees loaded now, and the sampler's mark then (zero for no targets).
func (c *Counters) loadedInstances(tgs []*counterTarget) (map[store.InstanceKey]bool, sweepMark) {
	out := make(map[store.InstanceKey]bool, len(tgs))
	var seen sweepMark
	if len(tgs) == 0 {
		return out, seen
	}
	c.sampler.Read(func(v sampler.View) {
		seen = sweepMark{v.LastTick(), v.Generation()}
		for _, tg := range tgs {
			if v.Live(tg.key) != nil {
				out[tg.key] = true
			}
		}
	})
	return out, seen
}

// openWindow starts counting tg, or marks it failed with the reason. A
// target gone from the kernel is dropped. The window pokes the loop when
// it stops, until ctx ends.
func (c *Counters) openWindow(ctx context.Context, tg *counterTarget, now time.Time) error {
	c.retryExact(now)
	if c.exact == nil {
		err := fmt.Errorf("%w: %s", errs.CountersUnavailable, counterReasonDetail(c.support.Exact))
		c.fail(tg, counterReason(c.support.Exact))
		return err
	}
	if tg.cum == nil {
		cum, ok, err := c.store.LastCountersOf(tg.key, store.CounterExact)
		if err != nil {
			c.log.Warn("read stored perf counters", "id", tg.key.ID, "err", err)
		}
		if !ok || err != nil {
			cum = store.CounterSample{Key: tg.key, Mechanism: store.CounterExact}
		}
		tg.cum = &cum
	}
	w, err := c.exact.Start(tg.key.ID, tg.window)
	if err != nil {
		if errors.Is(err, collectors.ErrGone) {
			c.dropTarget(tg, "unloaded")
			return err
		}
		reason := counterReason(err)
		c.fail(tg, reason)
		c.log.Warn("perf counters: cannot count program", "id", tg.key.ID, "name", tg.name, "reason", reason, "err", err)
		return err
	}
	// The open sample marks every event the window counts as present:
	// its cumulative value is where this window's counts start.
	open := *tg.cum
	open.Time, open.Present = now, 0
	for _, e := range c.events {
		open.Present |= 1 << e
	}
	if err := c.store.WriteCounters(open); err != nil {
		c.log.Warn("store perf counters", "id", tg.key.ID, "err", err)
	}
	c.mu.Lock()
	tg.w, tg.wStart, tg.next = w, now, now.Add(c.cfg.Every)
	c.mu.Unlock()
	// The loop stores a window when it stops (its time is up, its owner
	// let the target go), not when it next happens to look.
	go func() {
		select {
		case <-w.Done():
			c.poke()
		case <-ctx.Done():
		}
	}()
	return nil
}

// reprobeGap is the least time between two probes of exact counting after
// one failed for want of a resource (descriptors, memory): a daemon that
// started while the host was short tries again when a window is due or
// asked for, instead of going without exact counters for its life.
const reprobeGap = time.Minute

// shortage says whether err is a want of a resource that may pass.
func shortage(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN)
}

// retryExact probes exact counting again where it failed for a shortage
// at least reprobeGap ago. On success the targets that failed for it are
// due again. Called by the loop only, without mu.
func (c *Counters) retryExact(now time.Time) {
	if c.exact != nil || c.reprobe == nil || !shortage(c.support.Exact) || now.Sub(c.probedAt) < reprobeGap {
		return
	}
	exact, err := c.reprobe()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probedAt = now
	if err != nil {
		c.support.Exact = err
		c.log.Info("exact perf counters still unavailable", "reason", counterReason(err), "err", err)
		return
	}
	failedFor := counterReason(c.support.Exact)
	c.exact, c.support.Exact = exact, nil
	for _, tg := range c.targets {
		if tg.failed == failedFor {
			tg.failed, tg.next = "", now
		}
	}
	c.log.Info("exact perf counters available now: the probe that failed for want of a resource passed")
}

// fail marks tg failed: it is not retried, and holds no slot, so a
// waiting target may take it.
func (c *Counters) fail(tg *counterTarget, reason string) {
	c.mu.Lock()
	tg.failed = reason
	c.mu.Unlock()
	c.poke()
}

// finishWindow reads a stopped (or stopping) window, stores its totals,
// frees it, and drops the target if its owner let it go.
func (c *Counters) finishWindow(tg *counterTarget, now time.Time) {
	w := tg.w
	w.Stop()
	r, err := w.Read()
	w.Close()
	reason := w.Stopped()
	var pc *api.PerfCounters
	if err != nil {
		c.log.Warn("read perf counters", "id", tg.key.ID, "err", err)
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
		if err := c.store.WriteCounters(closed); err != nil {
			c.log.Warn("store perf counters", "id", tg.key.ID, "err", err)
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
		c.dropTarget(tg, string(reason))
	}
}

func (c *Counters) dropTarget(tg *counterTarget, why string) {
	c.mu.Lock()
	if c.targets[tg.key.ID] == tg {
		delete(c.targets, tg.key.ID)
	}
	c.mu.Unlock()
	c.log.Debug("perf counters: target dropped", "id", tg.key.ID, "name", tg.name, "why", why)
	c.poke() // a slot may have freed up
}

// counterRequest serves enable and disable in the loop.
func (c *Counters) counterRequest(ctx context.Context, req counterRequest) counterReply {
	id := req.key.ID
	if req.enable && c.exact == nil {
		c.retryExact(c.now())
	}
	c.mu.Lock()
	tg := c.targets[id]
	if tg != nil && tg.key != req.key {
		tg = nil // an old instance's id, reused
	}
	if !req.enable {
		if tg == nil {
			c.mu.Unlock()
			return counterReply{err: fmt.Errorf("%w: program %q (id %d) is not being counted", errs.BadRequest, req.name, id)}
		}
		delete(c.targets, id)
		c.mu.Unlock()
		if tg.w != nil {
			c.finishWindow(tg, c.now())
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
		return counterReply{err: fmt.Errorf("%w: %s", errs.CountersUnavailable, counterReasonDetail(c.support.Exact))}
	}
	if tg == nil {
		tg = &counterTarget{key: req.key, name: req.name}
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
		return counterReply{err: &collectors.CounterError{Op: fmt.Sprintf("count program %q (id %d)", req.name, id), Reason: collectors.ErrTooManyTargets,
			Err: fmt.Errorf("%d of %d targets enabled (--counters.max); disable one first", n, c.cfg.Max)}}
	}
	tg.waiting, tg.failed = false, ""
	c.targets[id] = tg
	c.mu.Unlock()
	if err := c.openWindow(ctx, tg, c.now()); err != nil {
		c.mu.Lock()
		if c.targets[id] == tg {
			delete(c.targets, id)
		}
		c.mu.Unlock()
		return counterReply{err: fmt.Errorf("count program %q (id %d): %s", req.name, id, counterReasonDetail(err))}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return counterReply{target: c.view(tg)}
}

// Enable starts counting the loaded program instance key (named name) in
// windows of window (0: --counters.window), or with enable false stops
// it, through the counter loop.
func (c *Counters) Enable(ctx context.Context, enable bool, key store.InstanceKey, name string, window time.Duration) (api.CounterTarget, error) {
	return c.do(ctx, counterRequest{enable: enable, key: key, name: name, window: window})
}

// do hands a request to the counter loop and waits for its answer.
func (c *Counters) do(ctx context.Context, req counterRequest) (api.CounterTarget, error) {
	c.mu.Lock()
	reqs, started := c.reqs, c.started
	c.mu.Unlock()
	if !started {
		return api.CounterTarget{}, fmt.Errorf("%w: the daemon has not started counting yet", errs.CountersUnavailable)
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
func (c *Counters) view(tg *counterTarget) api.CounterTarget {
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

func (c *Counters) openWindows() int {
	n := 0
	for _, tg := range c.targets {
		if tg.w != nil {
			n++
		}
	}
	return n
}

// windowCounters derives per-run figures from one window's reading.
func windowCounters(r collectors.CounterReading, start, end time.Time, reason collectors.StopReason) *api.PerfCounters {
	var totals [store.CounterEvents]*float64
	var names []string
	for _, v := range r.Values {
		names = append(names, v.Event.String())
		if n, ok := v.Scaled(); ok && int(v.Event) < store.CounterEvents {
			totals[v.Event] = ptr(n)
		}
	}
	pc := api.PerfPerRun(r.Counted, totals[:])
	pc.Mechanism, pc.Events, pc.WindowStart, pc.WindowEnd, pc.Stopped, pc.Entries = api.MechanismExact, names, start, end, string(reason), r.Entries
	return pc
}

// ptr is f as an optional API number.
func ptr(f float64) *float64 { return &f }

// WindowBetween derives the per-run figures between two cumulative
// samples, or nil when no run was counted between them. An event counts
// only when both samples have it.
func WindowBetween(a, b store.CounterSample) *api.PerfCounters {
	if b.Counted <= a.Counted || b.Mechanism != a.Mechanism {
		return nil
	}
	var totals [store.CounterEvents]*float64
	var names []string
	for i := range store.CounterEvents {
		if a.Has(i) && b.Has(i) && b.Values[i] >= a.Values[i] {
			totals[i] = ptr(float64(b.Values[i] - a.Values[i]))
			names = append(names, perfevent.Event(i).String())
		}
	}
	pc := api.PerfPerRun(b.Counted-a.Counted, totals[:])
	pc.Mechanism, pc.Events, pc.WindowStart, pc.WindowEnd = api.MechanismExact, names, a.Time, b.Time
	return pc
}
