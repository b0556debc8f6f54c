package collectors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/elastic/go-perf"

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
	cfg   ExactConfig
	ncpu  int
	slots *targetSlots
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
	return &ExactCounters{cfg: cfg, ncpu: ncpu, slots: newTargetSlots("count", cfg.MaxTargets)}, nil
}

// Events returns the events each window counts.
func (c *ExactCounters) Events() []perfevent.Event { return c.cfg.Events }

// Active returns the ids of the targets being counted now.
func (c *ExactCounters) Active() []uint32 { return c.slots.ids() }

// StopReason says why a window stopped.
type StopReason string

const (
	StopNone     StopReason = ""                             // still running
	StopEnded    StopReason = "window ended"                 // its duration passed
	StopReleased StopReason = "target released by its owner" // no process fd, link or pin left
	StopStopped  StopReason = "stopped"                      // Stop or Close
)

// CounterWindow counts one target for a bounded time (tracedWindow: what
// holds the target, and when it lets go). Once stopped only Read and
// Close remain useful.
type CounterWindow struct {
	*tracedWindow
	events []perfevent.Event // as configured
	// counted are the events the programs read, in their slots; events
	// this PMU does not count (unsupported) are left out.
	counted     []perfevent.Event
	unsupported map[perfevent.Event]error

	totals, runs, entryReadings *ebpf.Map
	eventMaps                   []*ebpf.Map   // one perf event array per event, indexed by CPU
	perfEvents                  []*perf.Event // one per event and CPU, event-major; nil for an offline CPU
}

// Start attaches counting to the target program with the given id for at
// most window, then detaches by itself. It fails with a *CounterError
// matching ErrTooManyTargets when MaxTargets windows are counting,
// ErrNoBTF when the target has no BTF, perfevent.ErrNoPMU for hardware events
// without a PMU, and ErrTracingRefused when the kernel refuses fentry or
// fexit. An event the PMU does not count (perfevent.ErrEventNotSupported)
// is left out and the others counted; Read says so for it. It fails
// then only when no event is left; with ErrGone when the target is not loaded. It holds nothing when
// it fails. Requires Linux 5.5, CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN.
func (c *ExactCounters) Start(target uint32, window time.Duration) (*CounterWindow, error) {
	if window <= 0 {
		return nil, fmt.Errorf("counter window %v: want > 0", window)
	}
	w := &CounterWindow{events: c.cfg.Events}
	tw, err := startTraced(c.slots, target, c.cfg.ProcRoot, w.load(c), w.closePerf)
	if err != nil {
		w.closePerf()
		w.closeMaps()
		return nil, err
	}
	w.tracedWindow = tw
	go tw.watch(window, c.cfg.OwnerPoll, c.cfg.ProcRoot)
	return w, nil
}

// load opens the per-CPU perf events and loads the counting pair against
// the target.
func (w *CounterWindow) load(c *ExactCounters) func(*ebpf.Program, string) (tracedPair, error) {
	return func(target *ebpf.Program, fn string) (tracedPair, error) {
		op := fmt.Sprintf("count program %d", tracedID(target))
		var firstErr error
		for _, e := range w.events {
			evs, err := openPerCPU(e, c.ncpu)
			if errors.Is(err, perfevent.ErrEventNotSupported) {
				if w.unsupported == nil {
					w.unsupported = make(map[perfevent.Event]error)
				}
				w.unsupported[e] = err
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			if err != nil {
				return tracedPair{}, err
			}
			w.counted = append(w.counted, e)
			w.perfEvents = append(w.perfEvents, evs...)
		}
		if len(w.counted) == 0 {
			return tracedPair{}, firstErr
		}

		spec, err := loadCounters()
		if err != nil {
			return tracedPair{}, err
		}
		if err := spec.Variables["num_events"].Set(uint32(len(w.counted))); err != nil {
			return tracedPair{}, err
		}
		for _, p := range spec.Programs {
			p.AttachTarget, p.AttachTo = target, fn
		}
		var objs countersObjects
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			return tracedPair{}, tracingError(op+": load fentry/fexit", err)
		}
		w.totals, w.runs, w.entryReadings = objs.Totals, objs.Runs, objs.EntryReadings
		w.eventMaps = []*ebpf.Map{objs.Events0, objs.Events1, objs.Events2, objs.Events3}
		pair := tracedPair{objs.CountersEntry, objs.CountersExit, ebpf.AttachTraceFEntry, ebpf.AttachTraceFExit}
		for i, e := range w.counted {
			if err := putPerfEvents(w.eventMaps[i], w.perfEvents[i*c.ncpu:(i+1)*c.ncpu]); err != nil {
				pair.first.Close()
				pair.second.Close()
				return tracedPair{}, fmt.Errorf("%s: %s: %w", op, e, err)
			}
		}
		return pair, nil
	}
}

// tracedID is prog's id, for messages; 0 if the kernel will not say.
func tracedID(prog *ebpf.Program) uint32 {
	info, err := prog.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return uint32(id)
}

// closePerf closes the perf events: they cost every run of the target
// while open.
func (w *CounterWindow) closePerf() {
	for _, ev := range w.perfEvents {
		if ev != nil {
			ev.Close()
		}
	}
	w.perfEvents = nil
}

func (w *CounterWindow) closeMaps() {
	for _, m := range append([]*ebpf.Map{w.totals, w.runs, w.entryReadings}, w.eventMaps...) {
		if m != nil {
			m.Close()
		}
	}
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
	// Err says why the event was not counted at all (the PMU does not
	// count it: perfevent.ErrEventNotSupported); the counts are then 0
	// and Scaled says absent.
	Err error
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
	r := CounterReading{Target: w.Target()}
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
	for _, e := range w.events {
		v := CounterValue{Event: e, Err: w.unsupported[e]}
		if slot := slices.Index(w.counted, e); slot >= 0 {
			if err := w.totals.Lookup(uint32(slot), &vals); err != nil {
				return r, fmt.Errorf("read %s: %w", e, err)
			}
			for _, pv := range vals {
				v.Counter += pv.Counter
				v.Enabled += pv.Enabled
				v.Running += pv.Running
			}
		}
		r.Values = append(r.Values, v)
	}
	return r, nil
}
