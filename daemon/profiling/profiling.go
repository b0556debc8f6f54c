// Package profiling is the daemon's profiling room. The profile package
// samples and symbolizes; this runs it: continuous windows stored as they
// end, on-demand captures, the sampled CPU % per program of the latest
// window, each program's sampled CPU time for /metrics, and the profiles'
// retention. stored.go reads stored profiles back and merges them.
package profiling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/internal/cadence"
	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/profile/kfilter"
	"github.com/bpfperf/bpfperf/store"
)

// Hooks are the calls profiling makes upward, set by the daemon: the
// sampled perf counters read run counts at each continuous window's edges
// and take each window's figures when it ends.
type Hooks struct {
	// WindowStarts is called as a window starts; it must not block.
	WindowStarts func(ctx context.Context, start time.Time)
	// WindowEnds is called with each window as it ends (w nil on a
	// failed window).
	WindowEnds func(ctx context.Context, w *profile.Window)
	// Loaded lists the programs loaded as the sampler last swept them
	// (profile.SymbolizerConfig.Loaded).
	Loaded func() (ids []uint32, ok bool)
}

// Profiling is the daemon's profiling state. It is off (Profiler says
// why) until Start succeeds.
type Profiling struct {
	store    *store.DB
	log      *slog.Logger
	now      func() time.Time
	procRoot string
	// running counts the goroutines Start starts, for Wait.
	running sync.WaitGroup

	mu   sync.Mutex
	cfg  Config
	prof *profile.Profiler // nil while off
	// learn queues program ids the sampler saw appear for the learner.
	learn     chan uint32
	capturing atomic.Bool

	// From the latest continuous window: each program's share, and which
	// programs the window covers whole (known to the symbolizer when it
	// began, that is at the end of the window before), so an idle program
	// reads 0% and one loaded mid-window reads nothing.
	shares      map[uint32]float64
	covered     map[uint32]bool
	known       map[uint32]bool
	lastEnd     time.Time
	last        store.ProfileInfo
	lastBuild   time.Duration
	windows     int64
	lastErr     error
	storeFailed bool
	// namesHidden: the last window could not name kernel and BPF frames
	// (logged once when it starts).
	namesHidden bool
	// For /metrics: each loaded program's sampled CPU time summed over
	// the continuous windows since the daemon started, and the samples
	// the kernel dropped, by event.
	cpuNs map[uint32]int64
	lost  map[string]uint64
	// The main event's kernel filter: the latest window's state and the
	// samples it passed and dropped since the daemon started.
	filter api.ProfilingFilter
	// drains are the main event's wake-ups before a window's end, since
	// the daemon started (profile.Drains).
	drains api.ProfilingDrains
	// What triggered each program's samples in the latest window (for
	// /metrics), nil before the first.
	triggers map[uint32][]profile.TriggerCost
	hooks    map[string]profile.HookCost
}

// New makes profiling, off until Start; now is the daemon's clock,
// procRoot where processes are read (usually /proc).
func New(cfg Config, db *store.DB, log *slog.Logger, now func() time.Time, procRoot string) *Profiling {
	return &Profiling{cfg: cfg, store: db, log: log, now: now, procRoot: procRoot}
}

// Start starts the learner, continuous profiling (unless Config.Every is
// 0) and profile retention, until ctx is done. An error leaves profiling
// off; the daemon runs on.
func (p *Profiling) Start(ctx context.Context, hooks Hooks) error {
	p.mu.Lock()
	cfg := p.cfg
	p.mu.Unlock()
	if err := cfg.Validate(); err != nil {
		return err
	}
	prof, event, err := p.open(ctx, cfg, hooks)
	if err != nil {
		return fmt.Errorf("start sampler: %w", err)
	}
	cfg.Event = event.String()
	learn := make(chan uint32, 4096)
	p.mu.Lock()
	p.cfg, p.prof, p.learn = cfg, prof, learn
	p.mu.Unlock()

	p.running.Go(func() { p.runLearner(ctx, prof, learn) })
	p.running.Go(func() { p.expire(ctx) })
	if cfg.Every > 0 {
		p.running.Go(func() {
			emit := func(w *profile.Window, err error) {
				var pp *pprof.Profile
				if w != nil {
					pp = w.Profile
				}
				p.window(pp, err)
				p.addLost(w)
				if hooks.WindowEnds != nil {
					hooks.WindowEnds(ctx, w)
				}
			}
			if err := prof.Run(ctx, cfg.Every, cfg.Duration, emit); err != nil {
				p.setError(err)
				p.log.Warn("continuous CPU profiling stopped", "err", err)
			}
		})
	}
	p.log.Info("CPU profiling on", "event", event, "hz", cfg.Hz, "every", cfg.Every, "window", cfg.Duration, "limit", cfg.Limit)
	return nil
}

// Wait waits, once Start's ctx is done, for what Start started to end:
// the continuous window cut short by the stop is stored before the store
// closes.
func (p *Profiling) Wait() { p.running.Wait() }

// open opens the profiler on cfg's event, or on cpu-clock where a
// hardware event does not open, and says which it opened.
func (p *Profiling) open(ctx context.Context, cfg Config, hooks Hooks) (*profile.Profiler, perfevent.Event, error) {
	event, _ := perfevent.Parse(cfg.Event) // Validate parsed it
	// Samples name the cgroup whose work they interrupted; without a
	// cgroup2 mount they carry bare ids, and triggers say "id <n>".
	var cgroups profile.CgroupResolver
	if r, err := cgroupid.New(p.procRoot + "/self/mountinfo"); err != nil {
		p.log.Info("profiling: cgroups of triggering tasks are shown by id", "reason", err)
	} else {
		cgroups = r
	}
	newProfiler := func(e perfevent.Event) (*profile.Profiler, error) {
		// The sampled counters mechanism samples every other event over
		// the same windows.
		others := slices.DeleteFunc(slices.Clone(perfevent.All), func(o perfevent.Event) bool { return o == e })
		sc := profile.SamplerConfig{Event: e, Hz: cfg.Hz, MaxDuration: cfg.Limit, ProcRoot: p.procRoot, Told: cfg.Told}
		if cfg.Filter {
			// Samples outside BPF code are dropped in the kernel; the
			// daemon's own tracepoint program (loadrec) does not turn
			// the filter off.
			sc.Filter, sc.Own = loadOwnFilter, collectors.LoadedHere
		}
		return profile.NewProfiler(profile.ProfilerConfig{Sampler: sc, Build: profile.BuildOptions{Cgroups: cgroups}, Events: others, Loaded: hooks.Loaded, WindowStarts: func(start time.Time) {
			if hooks.WindowStarts != nil {
				hooks.WindowStarts(ctx, start)
			}
		}})
	}
	prof, err := newProfiler(event)
	if err != nil && event.Hardware() {
		// Whatever refused the hardware event (no PMU, a PMU that cannot
		// sample it, counters busy), cpu-clock profiles still work.
		p.log.Warn("profiling on cpu-clock instead", "event", event, "reason", err)
		event = perfevent.CPUClock
		prof, err = newProfiler(event)
	}
	return prof, event, err
}

// ownFilter is the kernel filter, listed among the daemon's own programs
// (collectors.MarkOwn) while it is loaded.
type ownFilter struct {
	*kfilter.Filter
	forget func()
}

func loadOwnFilter() (profile.KernelFilter, error) {
	f, err := kfilter.Load()
	if err != nil {
		return nil, err
	}
	return ownFilter{f, collectors.MarkOwn(f.Program())}, nil
}

func (f ownFilter) Close() error {
	f.forget()
	return f.Filter.Close()
}

// runLearner tells the symbolizer about every loaded program, then about
// each one queued as it appears, until ctx is done.
func (p *Profiling) runLearner(ctx context.Context, prof *profile.Profiler, learn chan uint32) {
	// Programs that appeared before the queue existed.
	if _, err := prof.Symbolizer().LearnAll(); err != nil {
		p.log.Warn("profiling: learn loaded programs", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-learn:
			if err := prof.Symbolizer().Learn(id); err != nil && !errors.Is(err, os.ErrNotExist) {
				p.log.Debug("profiling: learn program", "id", id, "err", err)
			}
		}
	}
}

// Learn tells the symbolizer about a program that just appeared. The
// sampler calls it under its lock: the id is queued for the learner
// goroutine (a full queue drops it; the sampler's Observe learns programs
// it finds in samples anyway).
func (p *Profiling) Learn(id uint32) {
	p.mu.Lock()
	ch := p.learn
	p.mu.Unlock()
	if ch == nil {
		return // not started: Start learns every loaded program
	}
	select {
	case ch <- id:
	default:
	}
}

// Code tells the symbolizer of BPF JIT code of no program (a trampoline,
// a dispatcher) the kernel just made at addr (gone false) or freed.
// Called from the load-record follower's goroutine; while profiling is
// off it is dropped: the profiler reads kallsyms as it starts.
func (p *Profiling) Code(addr uint64, size uint32, name string, gone bool) {
	p.mu.Lock()
	prof := p.prof
	p.mu.Unlock()
	if prof == nil {
		return
	}
	if gone {
		prof.Symbolizer().RemoveCode(addr)
	} else {
		prof.Symbolizer().AddCode(addr, size, name)
	}
}

// window stores one continuous window and keeps its program shares for
// the progs view.
func (p *Profiling) window(pp *pprof.Profile, err error) {
	if err != nil {
		p.setError(err)
		p.log.Warn("profiling window", "err", err)
		return
	}
	end := time.Unix(0, pp.TimeNanos+pp.DurationNanos)
	build := time.Since(end)
	shares, serr := profile.ProgramShares(pp)
	nanos, _ := profile.ProgramNanos(pp)       // fails as ProgramShares does
	triggers, _ := profile.ProgramTriggers(pp) // so does this
	hooks, _ := profile.HookCosts(pp)          // and this
	info, id, err := p.Store(pp, store.ProfileContinuous)
	known := map[uint32]bool{}
	for _, id := range p.prof.Symbolizer().Programs() {
		known[id] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.windows++
	if p.cpuNs == nil {
		p.cpuNs = map[uint32]int64{}
	}
	for id, ns := range nanos {
		p.cpuNs[id] += ns
	}
	for id := range p.cpuNs {
		if !known[id] && nanos[id] == 0 {
			delete(p.cpuNs, id) // unloaded: its series leaves /metrics
		}
	}
	p.covered, p.known = p.known, known
	p.shares, p.lastEnd, p.lastBuild, p.triggers, p.hooks = shares, end, build, triggers, hooks
	if serr != nil {
		p.shares = nil
	}
	info.ID = id
	p.last = info
	p.lastErr = err
	if kerr := p.prof.Symbolizer().KallsymsErr(); kerr != nil {
		// Stored all the same, unnamed where kernel or BPF code ran;
		// status says why (a pod without CAP_SYSLOG, say).
		if err == nil {
			p.lastErr = kerr
		}
		if !p.namesHidden {
			p.log.Warn("profiling: kernel and BPF frames unnamed", "err", kerr)
		}
	}
	p.namesHidden = p.prof.Symbolizer().KallsymsErr() != nil
	if err != nil {
		// Log a failing store once, not every window.
		if !p.storeFailed {
			p.log.Warn("store profile", "err", err)
		}
		p.storeFailed = true
	} else {
		p.storeFailed = false
	}
}

// addLost adds up the samples each capture of a window lost.
func (p *Profiling) addLost(w *profile.Window) {
	if w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == nil {
		p.lost = map[string]uint64{}
	}
	for ev, st := range w.Stats {
		p.lost[ev.String()] += st.Lost
	}
	if st, ok := w.Stats[p.prof.Event()]; ok {
		f := st.Filter
		p.filter.On, p.filter.Reason, p.filter.Pages = f.On, f.Reason, f.Pages
		p.filter.Passed += f.Passed
		p.filter.Dropped += f.Dropped
		p.drains.Timed += uint64(st.Drains.Timed)
		p.drains.Full += uint64(st.Drains.Full)
	}
}

// Store stores a profile of kind and returns its info and id.
func (p *Profiling) Store(pp *pprof.Profile, kind string) (store.ProfileInfo, string, error) {
	p.mu.Lock()
	hz := p.cfg.Hz
	p.mu.Unlock()
	info := store.ProfileInfo{
		Start: time.Unix(0, pp.TimeNanos), Duration: pp.DurationNanos, Kind: kind,
		Event: profileEvent(pp), Hz: hz, Samples: profile.SampleCount(pp),
	}
	data, err := profile.Marshal(pp)
	if err != nil {
		return info, "", err
	}
	info.Bytes = len(data)
	id, err := p.store.PutProfile(info, data)
	return info, id, err
}

// profileEvent names the event p sampled: its value type, "cpu" being
// cpu-clock's.
func profileEvent(p *pprof.Profile) string {
	if p.DefaultSampleType == "" || p.DefaultSampleType == "cpu" {
		return perfevent.CPUClock.String()
	}
	return p.DefaultSampleType
}

func (p *Profiling) setError(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
}

// expire deletes profiles past their retention once a minute.
func (p *Profiling) expire(ctx context.Context) {
	t := cadence.NewTicker(time.Minute) // waking with the daemon's ticks
	defer t.Stop()
	for {
		p.mu.Lock()
		retention := p.cfg.Retention
		p.mu.Unlock()
		if n, err := p.store.ExpireProfiles(p.now(), retention); err != nil {
			p.log.Warn("expire profiles", "err", err)
		} else if n > 0 {
			p.log.Debug("expired profiles", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Profiler returns the running profiler, or an error saying why there is
// none.
func (p *Profiling) Profiler() (*profile.Profiler, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prof == nil {
		return nil, fmt.Errorf("%w: the daemon could not start it (see its log)", errs.ProfilingOff)
	}
	return p.prof, nil
}

// Capture takes an on-demand profile of ev for dur, one at a time (a
// second answers profile.ErrBusy), as status shows.
func (p *Profiling) Capture(ctx context.Context, prof *profile.Profiler, ev perfevent.Event, dur time.Duration) (*pprof.Profile, error) {
	p.capturing.Store(true)
	pp, err := prof.Capture(ctx, ev, dur)
	if !errors.Is(err, profile.ErrBusy) {
		p.capturing.Store(false)
	}
	return pp, err
}

// Every is how often a continuous window starts, 0 with continuous
// profiling off.
func (p *Profiling) Every() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Every
}

// Running is the profiler when it runs, nil when off, and how often a
// continuous window starts.
func (p *Profiling) Running() (*profile.Profiler, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prof, p.cfg.Every
}

// SampledCPU is a program's share of sampled CPU time in the latest
// continuous window, nil when no recent window covers it.
func (p *Profiling) SampledCPU(id uint32) *float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shares == nil || p.now().Sub(p.lastEnd) > 2*p.cfg.Every+10*time.Second {
		return nil
	}
	v, ok := p.shares[id]
	if !ok && !p.covered[id] {
		return nil
	}
	return &v
}

// SampledNs fills into[i] with program ids[i]'s CPU time in the
// continuous windows since the daemon started, and says whether
// continuous profiling runs.
func (p *Profiling) SampledNs(ids []uint32, into []int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prof == nil || p.cfg.Every <= 0 {
		return false
	}
	for i, id := range ids {
		into[i] = p.cpuNs[id]
	}
	return true
}

// WindowsState is what the continuous windows say of the profiler since
// the daemon started.
type WindowsState struct {
	On      bool // the profiler runs
	Windows int64
	Lost    map[string]uint64 // samples lost, by event
	Filter  api.ProfilingFilter
	Drains  api.ProfilingDrains
}

// Windows says whether the profiler runs, how many continuous windows it
// finished, the samples lost by event, the kernel filter's state and
// the captures' wake-ups.
func (p *Profiling) Windows() WindowsState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return WindowsState{On: p.prof != nil, Windows: p.windows, Lost: maps.Clone(p.lost), Filter: p.filter, Drains: p.drains}
}

// Status reports profiling in /v1/status, nil when off. The stored
// profiles' count and size are status's to fill from the store's counts,
// which can wait (store.Counts).
func (p *Profiling) Status() *api.ProfilingStatus {
	p.mu.Lock()
	if p.prof == nil {
		p.mu.Unlock()
		return nil
	}
	st := &api.ProfilingStatus{
		Continuous: p.cfg.Every > 0, Event: p.cfg.Event, Hz: p.cfg.Hz,
		EveryMs: p.cfg.Every.Milliseconds(), WindowMs: p.cfg.Duration.Milliseconds(),
		MaxCaptureMs: p.cfg.Limit.Milliseconds(), RetentionMs: p.cfg.Retention.Milliseconds(),
		LastProfileID: p.last.ID, LastProfileStart: p.last.Start, LastProfileSamples: p.last.Samples,
		LastProfileBytes: p.last.Bytes, LastBuildMs: float64(p.lastBuild.Microseconds()) / 1000,
		Windows: p.windows, CaptureRunning: p.capturing.Load(),
	}
	if p.windows > 0 {
		f, d := p.filter, p.drains
		st.Filter, st.Drains = &f, &d
	}
	if p.lastErr != nil {
		st.LastError = p.lastErr.Error()
	}
	sym := p.prof.Symbolizer()
	p.mu.Unlock()
	st.ProgramsKnown = len(sym.Programs())
	return st
}
