// Package latency is the daemon's latency room (issue 32): per-run latency
// distributions of chosen programs, from bounded windows in which an
// fentry/fexit pair times every run (collectors.LatencyTimer).
//
// Windows open on demand (Time: `bpfperf latency PROG`) and on a schedule
// for the programs --latency.programs names, at most --latency.max at
// once, each --latency.window long every --latency.every. Each window is
// stored when it ends (store.LatencyWindow) with an event that says what
// timing added to the program's bpf_stats run time while it was open, so
// that a bump in the mean is never unexplained.
package latency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/daemon/windowflags"
	"github.com/bpfperf/bpfperf/internal/loglinear"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/store"
)

// Config is the --latency.* flags.
type Config struct {
	// Programs are names or globs (path.Match syntax) of programs timed on
	// the schedule.
	Programs []string
	Window   time.Duration // how long each scheduled window lasts
	Every    time.Duration // how often a scheduled target's window starts
	Max      int           // windows open at once; each adds cost to every run of its target
	// Event is the perf event counted per run beside the time, by its
	// perfevent name ("cycles", the default), or "none".
	Event string
}

// Defaults and limits.
const (
	DefaultWindow = 10 * time.Second
	DefaultEvery  = 10 * time.Minute
	DefaultMax    = 2
	DefaultEvent  = "cycles"
	// NoEvent turns the per-run event off.
	NoEvent = "none"

	MinWindow = 100 * time.Millisecond
	MaxWindow = 10 * time.Minute
	maxEvery  = 24 * time.Hour
	maxMax    = 16
)

// limits are the --latency.* flags' defaults and bounds.
var limits = windowflags.Limits{Prefix: "latency", DefaultWindow: DefaultWindow, DefaultEvery: DefaultEvery, DefaultMax: DefaultMax,
	MinWindow: MinWindow, MaxWindow: MaxWindow, MaxEvery: maxEvery, MaxMax: maxMax}

func (c Config) withDefaults() Config {
	c.Window, c.Every, c.Max = limits.Defaults(c.Window, c.Every, c.Max)
	if c.Event == "" {
		c.Event = DefaultEvent
	}
	return c
}

// Validate checks the flags, with defaults for what is unset.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := c.event(); err != nil {
		return err
	}
	return limits.Check(c.Programs, c.Window, c.Every, c.Max)
}

// event is the per-run event Event names, nil for none.
func (c Config) event() (*perfevent.Event, error) {
	if c.Event == NoEvent {
		return nil, nil
	}
	e, err := perfevent.Parse(c.Event)
	if err != nil {
		return nil, fmt.Errorf("--latency.event: %w, or %s", err, NoEvent)
	}
	return &e, nil
}

// CheckWindow checks a window's length.
func CheckWindow(d time.Duration) error { return limits.CheckWindow(d) }

// Deps are what the room reads and writes.
type Deps struct {
	Sampler  *sampler.Sampler
	Store    *store.DB
	Logger   *slog.Logger
	Now      func() time.Time
	ProcRoot string
}

// Latency is the room's state.
type Latency struct {
	cfg   Config
	deps  Deps
	timer *collectors.LatencyTimer
	loop  sync.WaitGroup

	mu      sync.Mutex
	refused error // why windows cannot run here; nil when they can
	cal     collectors.Calibration
	// eventOff says why the per-run event is not counted (from the
	// calibration's window): "" when it is, or none was asked for.
	eventOff string
	// opened counts windows attached and not yet finished; not the
	// timer's Active, which holds a target's slot while it attaches, before
	// a run can be timed (status's timing says a window times runs now).
	opened  int
	windows int64
	lastErr string
	next    map[store.InstanceKey]time.Time // scheduled targets' next window
	// last is each program's newest window since the daemon started, for
	// /metrics; at most maxLast, the oldest dropped.
	last map[store.InstanceKey]api.LatencyWindow
	// timed are each instance's recent windows, open ones too, for
	// TimedBetween; at most maxTimed per instance.
	timed map[store.InstanceKey][]span
}

// span is a window's time; end is zero while it is open.
type span struct{ start, end time.Time }

// maxTimed bounds the windows remembered per instance for TimedBetween:
// enough for a regression window of a few minutes at a window every few
// seconds; older intervals are not asked about.
const maxTimed = 256

// forgetTimed is how long an instance's windows are remembered after its
// last one ended.
const forgetTimed = 24 * time.Hour

// maxLast bounds the windows kept for /metrics (and so its series).
const maxLast = 50

// New makes the room; Start probes the kernel and starts the schedule.
func New(cfg Config, deps Deps) *Latency {
	return &Latency{cfg: cfg.withDefaults(), deps: deps, next: map[store.InstanceKey]time.Time{}, last: map[store.InstanceKey]api.LatencyWindow{}, timed: map[store.InstanceKey][]span{}}
}

// Start calibrates timing (which also tells whether the kernel allows
// tracing programs) and, when --latency.programs names any, runs the
// schedule until ctx is done. It never fails the daemon: where timing
// cannot run, the status says why and requests answer LatencyUnavailable.
func (l *Latency) Start(ctx context.Context) {
	ev, err := l.cfg.event()
	if err != nil {
		l.deps.Logger.Warn("latency: per-run event off", "err", err)
	}
	timer, err := collectors.NewLatencyTimer(collectors.LatencyConfig{MaxTargets: l.cfg.Max, ProcRoot: l.deps.ProcRoot, Event: ev})
	if err == nil {
		var cal collectors.Calibration
		if cal, err = timer.Calibrate(); err == nil {
			l.mu.Lock()
			l.timer, l.cal, l.eventOff = timer, cal, eventOff(cal.EventErr)
			l.mu.Unlock()
		}
	}
	if err != nil {
		l.mu.Lock()
		l.refused = err
		l.mu.Unlock()
		l.deps.Logger.Info("latency windows unavailable", "err", err)
		return
	}
	if len(l.cfg.Programs) == 0 {
		return
	}
	l.loop.Add(1)
	go func() {
		defer l.loop.Done()
		l.schedule(ctx)
	}()
}

// Wait waits, once Start's ctx is done, for the schedule's open windows to
// be stored.
func (l *Latency) Wait() { l.loop.Wait() }

// Time opens a window on the loaded instance key for d, waits for it to
// end (or ctx to be done, which stops it early), stores it and returns it.
func (l *Latency) Time(ctx context.Context, key store.InstanceKey, name string, d time.Duration) (api.LatencyWindow, error) {
	if err := CheckWindow(d); err != nil {
		return api.LatencyWindow{}, fmt.Errorf("%w: duration %w", errs.BadRequest, err)
	}
	w, start, err := l.open(key, d)
	if err != nil {
		return api.LatencyWindow{}, err
	}
	select {
	case <-w.Done():
	case <-ctx.Done():
		w.Stop()
	}
	return l.finish(w, key, name, start)
}

// open starts a window on instance key, counting it open.
func (l *Latency) open(key store.InstanceKey, d time.Duration) (*collectors.LatencyWindow, time.Time, error) {
	id := key.ID
	l.mu.Lock()
	timer, refused := l.timer, l.refused
	l.mu.Unlock()
	if timer == nil {
		if refused == nil {
			refused = errors.New("not started")
		}
		return nil, time.Time{}, fmt.Errorf("%w: %w", errs.LatencyUnavailable, refused)
	}
	start := l.deps.Now()
	w, err := timer.Start(id, d)
	switch {
	case errors.Is(err, collectors.ErrTracingRefused):
		return nil, start, fmt.Errorf("%w: %w", errs.LatencyUnavailable, err)
	case errors.Is(err, collectors.ErrNoBTF):
		return nil, start, fmt.Errorf("%w: program %d has no BTF, which fentry/fexit need: %w", errs.BadRequest, id, err)
	case errors.Is(err, collectors.ErrGone):
		return nil, start, fmt.Errorf("%w: program %d is no longer loaded", errs.UnknownProgram, id)
	case err != nil:
		return nil, start, err
	}
	l.mu.Lock()
	l.opened++
	ts := append(l.timed[key], span{start: start})
	l.timed[key] = ts[max(len(ts)-maxTimed, 0):]
	// Instances timed long ago (unloaded since, most of them) are
	// forgotten: no interval that old is asked about.
	for k, ss := range l.timed {
		if last := ss[len(ss)-1]; !last.end.IsZero() && start.Sub(last.end) > forgetTimed {
			delete(l.timed, k)
		}
	}
	l.mu.Unlock()
	return w, start, nil
}

// finish reads a stopped window, stores it with its event, and frees it.
func (l *Latency) finish(w *collectors.LatencyWindow, key store.InstanceKey, name string, start time.Time) (api.LatencyWindow, error) {
	defer w.Close()
	r, err := w.Read()
	end := l.deps.Now()
	cal := l.closeSpan(key, start, end, r, err)
	if err != nil {
		return api.LatencyWindow{}, err
	}
	sw := Stored(key, r, cal, start, end)
	ev := store.Event{Time: end, Kind: "latency_window", ID: key.ID, Name: name, Detail: eventDetail(sw)}
	err = l.deps.Store.WriteLatency(sw)
	if err == nil {
		err = l.deps.Store.WriteTick(store.Tick{Time: end, Events: []store.Event{ev}})
	}
	out := View(sw, name)
	out.Stopped = string(w.Stopped())
	if r.Event != nil && r.EventErr != nil {
		out.PerRunUnavailable = r.Event.String() + ": " + eventOff(r.EventErr)
	}
	l.mu.Lock()
	l.windows++
	if err != nil {
		l.lastErr = err.Error()
	}
	l.keepLast(key, out)
	l.mu.Unlock()
	return out, err
}

func eventDetail(w store.LatencyWindow) string {
	return fmt.Sprintf("timed %d runs over %v; timing added about %d ns to each run's bpf_stats run time while open",
		w.Timed, w.Length.Round(time.Millisecond), w.AddedNs)
}

// closeSpan counts the window closed and ends its span, and returns the
// floor in force and what timing added to each run: as measured over the
// window, else the calibration's, or 0 where stats were off.
func (l *Latency) closeSpan(key store.InstanceKey, start, end time.Time, r collectors.LatencyReading, readErr error) collectors.Calibration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opened--
	cal := l.cal
	if readErr == nil {
		switch a, ok := measuredAdded(r, cal.FloorNs); {
		case ok:
			cal.AddedNs = a
		case r.Cost.Runs > 0 && r.Cost.RunTimeNs == 0:
			cal.AddedNs = 0 // stats were off: nothing was added to them
		}
	}
	for i, s := range l.timed[key] {
		if s.start.Equal(start) && s.end.IsZero() {
			l.timed[key][i].end = end
		}
	}
	return cal
}

// measuredAdded is what timing added to each run of the target over the
// window: bpf_stats' mean per run less the timed mean, plus the floor
// (which lies inside both). Under TCG it came to 1.3-1.7 times what the
// calibration on an empty program says: a run made by its own syscall
// pays more for the trampoline than one in a test-run loop. ok is false
// where stats were off or nothing was timed.
func measuredAdded(r collectors.LatencyReading, floor float64) (float64, bool) {
	if r.Stats.Runs == 0 || r.Hist.Count == 0 {
		return 0, false
	}
	return max(float64(r.Stats.RunTimeNs)/float64(r.Stats.Runs)-r.Hist.Mean()+floor, 0), true
}

// Stored is a window's reading as the store keeps it.
func Stored(key store.InstanceKey, r collectors.LatencyReading, cal collectors.Calibration, start, end time.Time) store.LatencyWindow {
	h := r.Hist
	return store.LatencyWindow{
		Key: key, End: end, Length: end.Sub(start),
		Entries: r.Entries, Timed: h.Count, Untimed: r.Untimed, SumNs: h.Sum, MaxNs: h.Max,
		FloorNs: uint64(cal.FloorNs + 0.5), AddedNs: uint64(cal.AddedNs + 0.5),
		Quantiles: quantiles(h),
		Octaves:   h.ByOctave(),
		PerRun:    storedEvent(r, cal),
	}
}

func quantiles(h loglinear.Histogram) [4]uint64 {
	return [4]uint64{uint64(h.Quantile(0.5)), uint64(h.Quantile(0.9)), uint64(h.Quantile(0.99)), uint64(h.Quantile(0.999))}
}

// storedEvent is the window's per-run event as the store keeps it, nil
// where it counted none.
func storedEvent(r collectors.LatencyReading, cal collectors.Calibration) *store.LatencyEvent {
	h := r.EventHist
	if r.Event == nil || h == nil {
		return nil
	}
	return &store.LatencyEvent{Event: uint8(*r.Event), Counted: h.Count, Missed: r.EventMissed, Sum: h.Sum, Max: h.Max,
		Floor: uint64(cal.EventFloor + 0.5), Quantiles: quantiles(*h)}
}

// eventOff says in a few words why the per-run event was not counted.
func eventOff(err error) string {
	var oe *perfevent.OpenError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, perfevent.ErrNoPMU):
		return "no hardware PMU"
	case errors.As(err, &oe):
		return oe.Summary()
	}
	return err.Error()
}

// View is a stored window as the API shows it: the floor taken off every
// figure (none below 0), the power-of-two buckets that hold runs.
func View(w store.LatencyWindow, name string) api.LatencyWindow {
	floor := float64(w.FloorNs)
	less := func(v uint64) float64 { return max(float64(v)-floor, 0) }
	out := api.LatencyWindow{
		ID: w.Key.ID, Name: name, Start: w.End.Add(-w.Length), End: w.End, Duration: w.Length.Seconds(),
		Runs: w.Timed, Untimed: w.Untimed,
		P50Ns: less(w.Quantiles[0]), P90Ns: less(w.Quantiles[1]), P99Ns: less(w.Quantiles[2]), P999Ns: less(w.Quantiles[3]),
		MaxNs: less(w.MaxNs), ErrorPct: 100 * loglinear.RelError, FloorNs: floor, AddedNsPerRun: float64(w.AddedNs),
		Buckets: []api.LatencyBucket{},
	}
	if w.Timed > 0 {
		out.MeanNs = max(float64(w.SumNs)/float64(w.Timed)-floor, 0)
	}
	if e := w.PerRun; e != nil {
		ef := float64(e.Floor)
		eless := func(v uint64) float64 { return max(float64(v)-ef, 0) }
		out.PerRun = &api.LatencyEventCounts{Event: perfevent.Event(e.Event).String(), Runs: e.Counted, Missed: e.Missed,
			P50: eless(e.Quantiles[0]), P90: eless(e.Quantiles[1]), P99: eless(e.Quantiles[2]), P999: eless(e.Quantiles[3]),
			Max: eless(e.Max), Floor: ef}
		if e.Counted > 0 {
			out.PerRun.Mean = max(float64(e.Sum)/float64(e.Counted)-ef, 0)
		}
	}
	for j, n := range w.Octaves {
		if n == 0 {
			continue
		}
		b := api.LatencyBucket{LoNs: 1 << j, HiNs: 1 << (j + 1), Runs: n}
		if j == 0 {
			b.LoNs = 0
		}
		if j == len(w.Octaves)-1 {
			b.HiNs = 0
		}
		out.Buckets = append(out.Buckets, b)
	}
	return out
}

// schedule opens windows for the programs --latency.programs names: a
// target's window every Every, at most Max open at once (the rest wait
// for the next pass). It checks once a second.
func (l *Latency) schedule(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var running sync.WaitGroup
	defer running.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, t := range l.due() {
			w, start, err := l.open(t.key, l.cfg.Window)
			if err != nil {
				l.mu.Lock()
				l.lastErr = err.Error()
				l.next[t.key] = l.deps.Now().Add(l.cfg.Every)
				l.mu.Unlock()
				continue
			}
			running.Add(1)
			go func() {
				defer running.Done()
				select {
				case <-w.Done():
				case <-ctx.Done():
					w.Stop()
				}
				l.finish(w, t.key, t.name, start)
			}()
		}
	}
}

type target struct {
	key  store.InstanceKey
	name string
}

// due are the loaded programs the globs match whose window is due, as
// many as free slots allow; their next window is set Every on.
func (l *Latency) due() []target {
	now := l.deps.Now()
	var matched []target
	l.deps.Sampler.Read(func(v sampler.View) {
		for _, p := range v.Programs() {
			// Never our own: the timing pair, the sweep's iterator.
			if m := p.Meta(); !p.Own() && l.matches(m.Name, m.KernelName) {
				matched = append(matched, target{p.Key(), m.Name})
			}
		}
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	free := l.cfg.Max - l.opened
	var out []target
	for _, t := range matched {
		if next, ok := l.next[t.key]; ok && now.Before(next) || free <= 0 {
			continue
		}
		l.next[t.key] = now.Add(l.cfg.Every)
		out = append(out, t)
		free--
	}
	return out
}

func (l *Latency) matches(names ...string) bool {
	for _, g := range l.cfg.Programs {
		for _, n := range names {
			if ok, _ := path.Match(g, n); ok && n != "" {
				return true
			}
		}
	}
	return false
}

// keepLast keeps w as key's newest window, dropping the oldest beyond
// maxLast. Called under l.mu.
func (l *Latency) keepLast(key store.InstanceKey, w api.LatencyWindow) {
	l.last[key] = w
	if len(l.last) <= maxLast {
		return
	}
	var oldest store.InstanceKey
	first := true
	for k, v := range l.last {
		if first || v.End.Before(l.last[oldest].End) {
			oldest, first = k, false
		}
	}
	delete(l.last, oldest)
}

// Last is each program's newest window since the daemon started (at most
// 50), by instance.
func (l *Latency) Last() map[store.InstanceKey]api.LatencyWindow {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.last)
}

// TimedBetween says whether a window of instance key was open at any time
// in (from, to]. A reader of bpf_stats over the interval (the regression
// detector) leaves such an interval out: timing adds to each run's run
// time, and a window must never read as the program slowing down.
func (l *Latency) TimedBetween(key store.InstanceKey, from, to time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.timed[key] {
		open := s.end.IsZero()
		if s.start.Before(to) && (open || s.end.After(from)) {
			return true
		}
	}
	return false
}

// Status is the room's part of /v1/status.
func (l *Latency) Status() *api.LatencyStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &api.LatencyStatus{
		Available: l.timer != nil, FloorNs: l.cal.FloorNs, AddedNsPerRun: l.cal.AddedNs,
		WindowMs: l.cfg.Window.Milliseconds(), EveryMs: l.cfg.Every.Milliseconds(), Max: l.cfg.Max,
		Programs: l.cfg.Programs, Timing: l.opened, Windows: l.windows, LastError: l.lastErr,
		Event: l.cfg.Event, EventFloor: l.cal.EventFloor, EventUnavailable: l.eventOff,
	}
	if l.refused != nil {
		st.Reason = reason(l.refused)
	}
	return st
}

// reason says in a few words why windows cannot run.
func reason(err error) string {
	if errors.Is(err, collectors.ErrTracingRefused) {
		return "the kernel refuses tracing programs (fentry/fexit)"
	}
	return err.Error()
}
