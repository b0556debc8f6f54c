package collectors

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/elastic/go-perf"

	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/loglinear"
	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// LatencyConfig configures latency windows.
type LatencyConfig struct {
	MaxTargets int    // targets timed at once; default 4
	ProcRoot   string // for the owner check; default /proc
	// OwnerPoll is how often a window checks that something besides itself
	// still holds its target; default 1s.
	OwnerPoll time.Duration
	// Event, if set, is counted per run beside the time (cycles, say).
	// A window whose event does not open on this host (a hardware event
	// and no PMU) times its runs without it and says why
	// (LatencyReading.EventErr).
	Event *perfevent.Event
}

// LatencyTimer times every run of chosen target programs into a per-CPU
// histogram (internal/loglinear's buckets), in bounded windows, with an
// fentry/fexit pair around the target (bpf/latency/latency.c). Like exact
// counting it needs a kernel that allows tracing programs and a target
// with BTF. Safe for concurrent use.
type LatencyTimer struct {
	cfg   LatencyConfig
	slots *targetSlots

	calMu sync.Mutex
	cal   *Calibration // nil until one succeeded
}

// NewLatencyTimer checks cfg and fills in defaults. It opens nothing.
func NewLatencyTimer(cfg LatencyConfig) (*LatencyTimer, error) {
	if cfg.MaxTargets == 0 {
		cfg.MaxTargets = 4
	}
	if cfg.MaxTargets < 0 {
		return nil, fmt.Errorf("latency: max targets %d < 0", cfg.MaxTargets)
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.OwnerPoll <= 0 {
		cfg.OwnerPoll = time.Second
	}
	return &LatencyTimer{cfg: cfg, slots: newTargetSlots("time", cfg.MaxTargets)}, nil
}

// Active returns the ids of the targets being timed now.
func (t *LatencyTimer) Active() []uint32 { return t.slots.ids() }

// LatencyWindow times one target's runs for a bounded time (tracedWindow:
// what holds the target, and when it lets go). Once stopped only Read and
// Close remain useful.
type LatencyWindow struct {
	*tracedWindow
	hist *ebpf.Map
	// The event counted per run, if any: its per-CPU perf events (nil
	// for an offline CPU), held while the window times, and the map that
	// hands them to the pair; eventErr says why it did not open.
	event      *perfevent.Event
	eventErr   error
	perfEvents []*perf.Event
	eventMap   *ebpf.Map
	// The timing pair, held only until the window detaches, to read what
	// it cost from its own bpf_stats as it goes.
	pair [2]*ebpf.Program
	cost TimingCost
	// The target's bpf_stats when the pair was loaded, and over the
	// window once it detached (zero where they could not be read).
	targetID   uint32
	statsStart *ebpf.ProgramStats
	stats      TargetStats
}

// TargetStats is what the target's bpf_stats counted from just before the
// window attached to just after it detached: with the histogram, what
// timing really added to each of its runs (latency.measuredAdded).
type TargetStats struct {
	RunTimeNs uint64
	Runs      uint64
}

// TimingCost is what the timing pair's own programs ran, from their
// bpf_stats: the part of the window's cost that lands inside the target's
// run_time_ns (the trampoline that calls them adds a little more; `make
// bench` measures the whole). Zero while the kernel's stats are off.
type TimingCost struct {
	RunTimeNs uint64 // both programs, all runs
	Runs      uint64 // fexit runs: one per timed or untimed run of the target
}

// Start attaches timing to the target program with the given id for at
// most window, then detaches by itself. It fails as ExactCounters.Start
// does (ErrTooManyTargets, ErrNoBTF, ErrTracingRefused, ErrGone) and holds
// nothing when it fails.
func (t *LatencyTimer) Start(target uint32, window time.Duration) (*LatencyWindow, error) {
	if window <= 0 {
		return nil, fmt.Errorf("latency window %v: want > 0", window)
	}
	return t.start(t.slots, target, window)
}

func (t *LatencyTimer) start(slots *targetSlots, target uint32, window time.Duration) (*LatencyWindow, error) {
	w := &LatencyWindow{event: t.cfg.Event}
	tw, err := startTraced(slots, target, t.cfg.ProcRoot, w.load, w.letGo)
	if err != nil {
		w.letGo()
		w.closeMaps()
		return nil, err
	}
	w.tracedWindow = tw
	go tw.watch(window, t.cfg.OwnerPoll, t.cfg.ProcRoot)
	return w, nil
}

// load loads the timing pair against the target, fexit first (see
// tracedPair).
func (w *LatencyWindow) load(target *ebpf.Program, fn string) (tracedPair, error) {
	spec, err := loadLatency()
	if err != nil {
		return tracedPair{}, err
	}
	for _, p := range spec.Programs {
		p.AttachTarget, p.AttachTo = target, fn
	}
	if w.event != nil {
		ncpu, err := ebpf.PossibleCPU()
		if err != nil {
			return tracedPair{}, err
		}
		if w.perfEvents, w.eventErr = openPerCPU(*w.event, ncpu); w.eventErr == nil {
			if err := spec.Variables["with_event"].Set(uint32(1)); err != nil {
				return tracedPair{}, err
			}
			spec.Maps["event"].MaxEntries = uint32(len(w.perfEvents))
		}
	}
	var objs latencyObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return tracedPair{}, tracingError(fmt.Sprintf("time program %d: load fentry/fexit", tracedID(target)), err)
	}
	w.hist, w.eventMap = objs.Latency, objs.Event
	if err := putPerfEvents(w.eventMap, w.perfEvents); err != nil {
		objs.Close()
		return tracedPair{}, fmt.Errorf("time program %d: %v: %w", tracedID(target), *w.event, err)
	}
	w.targetID = tracedID(target)
	if s, err := target.Stats(); err == nil {
		w.statsStart = s
	}
	for i, p := range []*ebpf.Program{objs.LatencyEntry, objs.LatencyExit} {
		if w.pair[i], err = p.Clone(); err != nil {
			objs.Close()
			return tracedPair{}, err
		}
	}
	return tracedPair{objs.LatencyExit, objs.LatencyEntry, ebpf.AttachTraceFExit, ebpf.AttachTraceFEntry}, nil
}

// letGo reads the timing pair's cost once its links are gone (no run can
// add to it any more) and closes it, and reads what the target's
// bpf_stats counted over the window (a brief fd, if it is still loaded).
func (w *LatencyWindow) letGo() {
	// The perf events first: they cost every run while open.
	for _, ev := range w.perfEvents {
		if ev != nil {
			ev.Close()
		}
	}
	w.perfEvents = nil
	if w.statsStart != nil {
		if target, err := ebpf.NewProgramFromID(ebpf.ProgramID(w.targetID)); err == nil {
			if s, err := target.Stats(); err == nil && s.RunCount >= w.statsStart.RunCount {
				w.stats = TargetStats{RunTimeNs: uint64(s.Runtime - w.statsStart.Runtime), Runs: s.RunCount - w.statsStart.RunCount}
			}
			target.Close()
		}
	}
	for i, p := range w.pair {
		if p == nil {
			continue
		}
		if s, err := p.Stats(); err == nil {
			w.cost.RunTimeNs += uint64(s.Runtime)
			if i == 1 {
				w.cost.Runs = s.RunCount
			}
		}
		p.Close()
		w.pair[i] = nil
	}
}

// LatencyReading is what a window has timed so far.
type LatencyReading struct {
	Target  uint32
	Entries uint64 // runs the fentry program saw
	// Untimed are runs left out of the histogram: exits whose entry the
	// window missed (a run under way when it attached) and runs nested
	// more than 4 deep on one CPU.
	Untimed uint64
	Hist    loglinear.Histogram
	// Cost is the timing pair's own run time; set once the window stopped.
	Cost TimingCost
	// Stats is the target's bpf_stats over the window; set once the
	// window stopped, zero where they were off or could not be read.
	Stats TargetStats
	// Event is what was counted per run beside the time, nil if nothing
	// was asked for; EventHist is its distribution over the runs it
	// counted, nil where it did not open (EventErr says why).
	// EventMissed are timed runs it could not count: a reading that
	// failed, or an event the kernel had not scheduled on that CPU.
	Event       *perfevent.Event
	EventHist   *loglinear.Histogram
	EventMissed uint64
	EventErr    error
}

// Read returns the runs timed so far, summed over CPUs. It works while
// timing and after the window stopped, until Close.
func (w *LatencyWindow) Read() (LatencyReading, error) {
	r := LatencyReading{Target: w.Target(), Hist: loglinear.New(), Event: w.event, EventErr: w.eventErr}
	var cpus []latencyLatency
	if err := w.hist.Lookup(uint32(0), &cpus); err != nil {
		return r, fmt.Errorf("read latency: %w", err)
	}
	if w.event != nil && w.eventErr == nil {
		h := loglinear.New()
		r.EventHist = &h
	}
	for _, c := range cpus {
		r.Entries += c.Entries
		r.Untimed += c.Untimed
		r.Hist.Count += c.Timed
		r.Hist.Sum += c.SumNs
		r.Hist.Max = max(r.Hist.Max, c.MaxNs)
		for i, n := range c.Counts {
			r.Hist.Counts[i] += n
		}
		if h := r.EventHist; h != nil {
			r.EventMissed += c.EvMissed
			h.Count += c.EvCounted
			h.Sum += c.EvSum
			h.Max = max(h.Max, c.EvMax)
			for i, n := range c.EvCounts {
				h.Counts[i] += n
			}
		}
	}
	select {
	case <-w.Done():
		r.Cost, r.Stats = w.cost, w.stats
	default:
	}
	return r, nil
}

// Close stops the window and frees its maps.
func (w *LatencyWindow) Close() error {
	w.Stop()
	return w.closeMaps()
}

func (w *LatencyWindow) closeMaps() error {
	var err error
	for _, m := range []*ebpf.Map{w.hist, w.eventMap} {
		if m != nil {
			err = errors.Join(err, m.Close())
		}
	}
	return err
}

// Calibration is what timing adds, measured on an empty program of our
// own driven with BPF_PROG_TEST_RUN: the same trampoline and clock reads
// any target gets.
type Calibration struct {
	// FloorNs is the median time the pair measures for an empty run: the
	// part of the timing inside each measured interval. Views take it off.
	FloorNs float64
	// AddedNs is what the pair adds to each run's bpf_stats run time (the
	// trampoline and both programs), the median over batches; 0 when the
	// kernel's stats were off, when nothing is added to undo either.
	AddedNs float64
	// EventFloor is the median count of the per-run event (LatencyConfig)
	// for an empty run: the clock reads and bookkeeping between its two
	// readings. 0 where no event was counted, and EventErr says why
	// where one was asked for and did not open.
	EventFloor float64
	EventErr   error
}

// calibrationRuns is how many empty runs each of the 3 batches makes.
const calibrationRuns = 2000

// Calibrate measures the timing floor and cost and keeps them once it has
// both (the added cost needs the kernel's stats on): they are the
// kernel's and the CPU's, the same for every target. It holds nothing
// after it returns.
func (t *LatencyTimer) Calibrate() (Calibration, error) {
	t.calMu.Lock()
	defer t.calMu.Unlock()
	if t.cal != nil {
		return *t.cal, nil
	}
	empty, err := btfprog.Load("bpfperf_floor", asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()})
	if err != nil {
		return Calibration{}, fmt.Errorf("latency calibration: load empty program: %w", err)
	}
	defer empty.Close()
	in := make([]byte, 14) // the smallest input a socket filter's test run takes
	batch := func() (float64, error) {
		before, err := empty.Stats()
		if err != nil {
			return 0, err
		}
		if _, err := empty.Run(&ebpf.RunOptions{Data: in, Repeat: calibrationRuns}); err != nil {
			return 0, err
		}
		after, err := empty.Stats()
		if err != nil {
			return 0, err
		}
		if after.RunCount == before.RunCount {
			return 0, nil // stats off
		}
		return float64(after.Runtime-before.Runtime) / float64(after.RunCount-before.RunCount), nil
	}
	var bare, timed []float64
	for range 3 {
		ns, err := batch()
		if err != nil {
			return Calibration{}, fmt.Errorf("latency calibration: %w", err)
		}
		bare = append(bare, ns)
	}
	info, err := empty.Info()
	if err != nil {
		return Calibration{}, err
	}
	id, _ := info.ID()
	// Its own slot: calibrating is not one of the targets the limit counts.
	w, err := t.start(newTargetSlots("time", 1), uint32(id), time.Minute)
	if err != nil {
		return Calibration{}, fmt.Errorf("latency calibration: %w", err)
	}
	defer w.Close()
	for range 3 {
		ns, err := batch()
		if err != nil {
			return Calibration{}, fmt.Errorf("latency calibration: %w", err)
		}
		timed = append(timed, ns)
	}
	w.Stop()
	r, err := w.Read()
	if err != nil {
		return Calibration{}, fmt.Errorf("latency calibration: %w", err)
	}
	if r.Hist.Count == 0 {
		return Calibration{}, errors.New("latency calibration: the empty program's runs were not timed")
	}
	c := Calibration{FloorNs: r.Hist.Quantile(0.5), EventErr: r.EventErr}
	if r.EventHist != nil && r.EventHist.Count > 0 {
		c.EventFloor = r.EventHist.Quantile(0.5)
	}
	if b, tm := medianFloat(bare), medianFloat(timed); b > 0 && tm > b {
		c.AddedNs = tm - b
		t.cal = &c // kept only once stats were on to measure what is added
	}
	return c, nil
}

func medianFloat(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
