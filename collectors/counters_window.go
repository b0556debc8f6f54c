package collectors

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// ExactConfig configures exact counting.
type ExactConfig struct {
	Events     []perfevent.Event // read around each run; default cpu-clock; at most 4
	MaxTargets int               // targets counted at once; default 4
	ProcRoot   string            // for the owner check; default /proc
	// OwnerPoll is how often a window checks that something besides itself
	// still holds its target; default 1s.
	OwnerPoll time.Duration
}

// maxCounterEvents matches MAX_EVENTS in bpf/counters/counters.c.
const maxCounterEvents = 4

// ExactCounters counts perf events around every run of chosen target
// programs, in bounded windows, with fentry/fexit programs (the exact
// mechanism; see ProbeCounters for whether the kernel allows it). Safe for
// concurrent use.
type ExactCounters struct {
	cfg  ExactConfig
	ncpu int

	mu     sync.Mutex
	active map[uint32]*CounterWindow
}

// NewExactCounters checks cfg and fills in defaults. It opens nothing.
func NewExactCounters(cfg ExactConfig) (*ExactCounters, error) {
	if len(cfg.Events) == 0 {
		cfg.Events = []perfevent.Event{perfevent.CPUClock}
	}
	if len(cfg.Events) > maxCounterEvents {
		return nil, fmt.Errorf("exact counters: %d events, at most %d", len(cfg.Events), maxCounterEvents)
	}
	for i, e := range cfg.Events {
		if _, err := e.CountingAttr(); err != nil {
			return nil, err
		}
		for _, f := range cfg.Events[:i] {
			if e == f {
				return nil, fmt.Errorf("exact counters: event %s twice", e)
			}
		}
	}
	if cfg.MaxTargets == 0 {
		cfg.MaxTargets = 4
	}
	if cfg.MaxTargets < 0 {
		return nil, fmt.Errorf("exact counters: max targets %d < 0", cfg.MaxTargets)
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.OwnerPoll <= 0 {
		cfg.OwnerPoll = time.Second
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("exact counters: %w", err)
	}
	return &ExactCounters{cfg: cfg, ncpu: ncpu, active: make(map[uint32]*CounterWindow)}, nil
}

// Events returns the events each window counts.
func (c *ExactCounters) Events() []perfevent.Event { return c.cfg.Events }

// Active returns the ids of the targets being counted now.
func (c *ExactCounters) Active() []uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]uint32, 0, len(c.active))
	for id := range c.active {
		ids = append(ids, id)
	}
	return ids
}

// StopReason says why a window stopped counting.
type StopReason string

const (
	StopNone     StopReason = ""                             // still counting
	StopEnded    StopReason = "window ended"                 // its duration passed
	StopReleased StopReason = "target released by its owner" // no process fd, link or pin left
	StopStopped  StopReason = "stopped"                      // Stop or Close
)

// CounterWindow counts one target for a bounded time. While it counts it
// holds the target loaded (an attached fentry program does); once stopped
// it holds nothing of the target, and only Read and Close remain useful.
type CounterWindow struct {
	target  uint32
	events  []perfevent.Event
	tracked bool
	parent  *ExactCounters

	totals, runs, entryReadings, eventsMap *ebpf.Map

	mu         sync.Mutex
	links      []link.Link
	perfEvents []*perf.Event // one per event and CPU; nil for an offline CPU
	reason     StopReason
	forget     func() // drops the fentry/fexit pair from this process's own (own.go)
	done       chan struct{}
	quit       chan struct{}
}

// Start attaches counting to the target program with the given id for at
// most window, then detaches by itself. It fails with a *CounterError
// matching ErrTooManyTargets when MaxTargets windows are counting,
// ErrNoBTF when the target has no BTF, perfevent.ErrNoPMU for hardware events
// without a PMU, and ErrTracingRefused when the kernel refuses fentry or
// fexit; with ErrGone when the target is not loaded. It holds nothing when
// it fails. Requires Linux 5.5, CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN.
func (c *ExactCounters) Start(target uint32, window time.Duration) (*CounterWindow, error) {
	if window <= 0 {
		return nil, fmt.Errorf("counter window %v: want > 0", window)
	}
	w := &CounterWindow{
		target: target,
		events: c.cfg.Events,
		parent: c,
		done:   make(chan struct{}),
		quit:   make(chan struct{}),
	}
	if err := c.reserve(w); err != nil {
		return nil, err
	}
	if err := w.attach(c); err != nil {
		w.detach(StopStopped)
		w.closeMaps()
		return nil, err
	}
	go w.watch(window, c.cfg.OwnerPoll, c.cfg.ProcRoot)
	return w, nil
}

func (c *ExactCounters) reserve(w *CounterWindow) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	op := fmt.Sprintf("count program %d", w.target)
	if _, ok := c.active[w.target]; ok {
		return fmt.Errorf("%s: already counting it", op)
	}
	if len(c.active) >= c.cfg.MaxTargets {
		return &CounterError{Op: op, Reason: ErrTooManyTargets,
			Err: fmt.Errorf("%d of %d targets counting", len(c.active), c.cfg.MaxTargets)}
	}
	c.active[w.target] = w
	return nil
}

func (c *ExactCounters) release(w *CounterWindow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active[w.target] == w {
		delete(c.active, w.target)
	}
}

func (w *CounterWindow) attach(c *ExactCounters) error {
	op := fmt.Sprintf("count program %d", w.target)
	// Look for owners before we open the target ourselves.
	held, err := targetHeld(c.cfg.ProcRoot, w.target)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w.tracked = held

	target, err := ebpf.NewProgramFromID(ebpf.ProgramID(w.target))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", op, ErrGone)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	// The links hold the target from here on; our fd must not outlive them.
	defer target.Close()
	fn, err := mainFuncName(target)
	if err != nil {
		return &CounterError{Op: op, Reason: ErrNoBTF, Err: err}
	}

	for _, e := range w.events {
		for cpu := 0; cpu < c.ncpu; cpu++ {
			ev, err := openCounter(e, cpu)
			if errors.Is(err, unix.ENODEV) && cpu > 0 {
				ev = nil // offline CPU: nothing runs there
			} else if err != nil {
				return err
			}
			w.perfEvents = append(w.perfEvents, ev)
		}
	}

	spec, err := loadCounters()
	if err != nil {
		return err
	}
	if err := spec.Variables["num_cpus"].Set(uint32(c.ncpu)); err != nil {
		return err
	}
	if err := spec.Variables["num_events"].Set(uint32(len(w.events))); err != nil {
		return err
	}
	spec.Maps["events"].MaxEntries = uint32(c.ncpu * len(w.events))
	for _, p := range spec.Programs {
		p.AttachTarget, p.AttachTo = target, fn
	}
	var objs countersObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return tracingError(op+": load fentry/fexit", err)
	}
	defer objs.CountersEntry.Close()
	defer objs.CountersExit.Close()
	w.forget = markOwn(objs.CountersEntry, objs.CountersExit)
	w.totals, w.runs, w.entryReadings, w.eventsMap = objs.Totals, objs.Runs, objs.EntryReadings, objs.Events

	for i, ev := range w.perfEvents {
		if ev == nil {
			continue
		}
		fd, err := ev.FD()
		if err != nil {
			return fmt.Errorf("%s: perf event %d: %w", op, i, err)
		}
		if err := w.eventsMap.Put(uint32(i), uint32(fd)); err != nil {
			return fmt.Errorf("%s: put perf event %d: %w", op, i, err)
		}
	}
	for _, a := range []struct {
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{{objs.CountersEntry, ebpf.AttachTraceFEntry}, {objs.CountersExit, ebpf.AttachTraceFExit}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog, AttachType: a.typ})
		if err != nil {
			return tracingError(op+": attach "+a.typ.String(), err)
		}
		w.mu.Lock()
		w.links = append(w.links, l)
		w.mu.Unlock()
	}
	return nil
}

// mainFuncName returns the BTF name of the program's main function, which
// fentry/fexit attach to.
func mainFuncName(prog *ebpf.Program) (string, error) {
	info, err := prog.Info()
	if err != nil {
		return "", err
	}
	if _, ok := info.BTFID(); !ok {
		return "", errors.New("loaded without BTF")
	}
	funcs, err := info.FuncInfos()
	if err != nil {
		return "", fmt.Errorf("func info: %w", err)
	}
	for _, f := range funcs {
		if f.Offset == 0 && f.Func != nil && f.Func.Name != "" {
			return f.Func.Name, nil
		}
	}
	return "", errors.New("no BTF function at offset 0")
}

// watch stops the window when its time is up, when Stop is called, or when
// nothing besides the window holds the target any more. A target that had
// no visible owner at the start (held by a legacy attachment, a prog array)
// is not watched: the window's bound is all that limits it.
func (w *CounterWindow) watch(window, poll time.Duration, procRoot string) {
	end := time.NewTimer(window)
	defer end.Stop()
	var tick <-chan time.Time
	if w.tracked {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-end.C:
			w.detach(StopEnded)
			return
		case <-w.quit:
			w.detach(StopStopped)
			return
		case <-tick:
			if held, err := targetHeld(procRoot, w.target); err == nil && !held {
				w.detach(StopReleased)
				return
			}
		}
	}
}

// detach drops everything that holds the target or costs it time: the
// links and the perf events. The maps stay for Read.
func (w *CounterWindow) detach(reason StopReason) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason != StopNone {
		return
	}
	w.reason = reason
	for _, l := range w.links {
		l.Close()
	}
	w.links = nil
	for _, ev := range w.perfEvents {
		if ev != nil {
			ev.Close()
		}
	}
	w.perfEvents = nil
	if w.forget != nil {
		w.forget()
	}
	w.parent.release(w)
	close(w.done)
}

func (w *CounterWindow) closeMaps() {
	for _, m := range []*ebpf.Map{w.totals, w.runs, w.entryReadings, w.eventsMap} {
		if m != nil {
			m.Close()
		}
	}
}

// Target returns the id of the counted program.
func (w *CounterWindow) Target() uint32 { return w.target }

// Tracked reports whether the window watches the target's owners and
// stops early when they let it go. It does not when the target had no
// process fd, link or pin when the window started.
func (w *CounterWindow) Tracked() bool { return w.tracked }

// Done is closed when the window stops counting, whatever stopped it (its
// time, its owner letting go, Stop or Close): a caller waits on it rather
// than polling Stopped, which then says why.
func (w *CounterWindow) Done() <-chan struct{} { return w.done }

// Stopped returns why the window stopped, or StopNone while it counts.
func (w *CounterWindow) Stopped() StopReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// Stop detaches from the target now. It returns once the window holds
// nothing of the target. Read still works afterwards.
func (w *CounterWindow) Stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

// Close stops the window and frees its maps.
func (w *CounterWindow) Close() error {
	w.Stop()
	w.closeMaps()
	return nil
}

// CounterValue is one event's total over the counted runs, summed over CPUs.
type CounterValue struct {
	Event   perfevent.Event
	Counter uint64 // raw count while the event was on the PMU
	Enabled uint64 // ns the event was enabled during the runs
	Running uint64 // ns it was actually counting (less when multiplexed)
}

// Scaled returns Counter corrected for multiplexing (Counter * Enabled /
// Running). ok is false when the event never counted: absent, not zero.
func (v CounterValue) Scaled() (n float64, ok bool) {
	if v.Running == 0 {
		return 0, false
	}
	n = float64(v.Counter)
	if v.Enabled > v.Running {
		n = n * float64(v.Enabled) / float64(v.Running)
	}
	return n, true
}

// CounterReading is what a window has counted so far.
type CounterReading struct {
	Target  uint32
	Entries uint64 // runs seen by the fentry program
	Exits   uint64 // runs seen by the fexit program
	// Counted is how many runs the totals cover: a run is left out when a
	// counter read fails or the event was not active on its CPU (its
	// enabled time did not move).
	Counted uint64
	Values  []CounterValue
}

// PerRun returns the scaled count of e per counted run, or ok false when
// e is not counted or no run was.
func (r CounterReading) PerRun(e perfevent.Event) (float64, bool) {
	if r.Counted == 0 {
		return 0, false
	}
	for _, v := range r.Values {
		if v.Event == e {
			n, ok := v.Scaled()
			return n / float64(r.Counted), ok
		}
	}
	return 0, false
}

// Read returns the totals so far. It works while counting and after the
// window stopped, until Close.
func (w *CounterWindow) Read() (CounterReading, error) {
	r := CounterReading{Target: w.target}
	var runs []uint64
	for key, dst := range []*uint64{&r.Entries, &r.Exits, &r.Counted} {
		if err := w.runs.Lookup(uint32(key), &runs); err != nil {
			return r, fmt.Errorf("read runs: %w", err)
		}
		for _, n := range runs {
			*dst += n
		}
	}
	var vals []countersBpfPerfEventValue
	for i, e := range w.events {
		if err := w.totals.Lookup(uint32(i), &vals); err != nil {
			return r, fmt.Errorf("read %s: %w", e, err)
		}
		v := CounterValue{Event: e}
		for _, pv := range vals {
			v.Counter += pv.Counter
			v.Enabled += pv.Enabled
			v.Running += pv.Running
		}
		r.Values = append(r.Values, v)
	}
	return r, nil
}
