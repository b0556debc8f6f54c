package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// CPU profiling of BPF programs (issue 4). The profile package samples and
// symbolizes; this file runs it: continuous windows stored as they end,
// on-demand captures through the API, the sampled CPU % per program of the
// latest window, and the profiles' retention.

// profiling is the daemon's profiling state.
type profiling struct {
	mu   sync.Mutex
	cfg  ProfileConfig
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
	// For /metrics: each loaded program's sampled CPU time summed over
	// the continuous windows since the daemon started, and the samples
	// the kernel dropped, by event.
	cpuNs map[uint32]int64
	lost  map[string]uint64
}

// startProfiling starts the learner, continuous profiling (unless
// --profile.every is 0) and profile retention. An error leaves profiling
// off; the daemon runs on.
func (d *Daemon) startProfiling(ctx context.Context) error {
	cfg := d.cfg.Profile
	if err := cfg.Validate(); err != nil {
		return err
	}
	event, _ := perfevent.Parse(cfg.Event) // Validate parsed it
	newProfiler := func(e perfevent.Event) (*profile.Profiler, error) {
		// The sampled counters mechanism samples every other event over
		// the same windows (counters_sampled.go).
		others := slices.DeleteFunc(slices.Clone(perfevent.All), func(o perfevent.Event) bool { return o == e })
		return profile.NewProfiler(profile.ProfilerConfig{Sampler: profile.SamplerConfig{
			Event: e, Hz: cfg.Hz, MaxDuration: cfg.Limit, ProcRoot: d.cfg.ProcRoot,
		}, Events: others, WindowStarts: func(start time.Time) { d.sampledWindowStarts(ctx, start) }})
	}
	prof, err := newProfiler(event)
	if err != nil && event.Hardware() {
		// Whatever refused the hardware event (no PMU, a PMU that cannot
		// sample it, counters busy), cpu-clock profiles still work.
		d.cfg.Logger.Warn("profiling on cpu-clock instead", "event", event, "reason", err)
		event = perfevent.CPUClock
		prof, err = newProfiler(event)
	}
	if err != nil {
		return fmt.Errorf("start sampler: %w", err)
	}
	cfg.Event = event.String()
	learn := make(chan uint32, 4096)
	d.prof.mu.Lock()
	d.prof.cfg, d.prof.prof, d.prof.learn = cfg, prof, learn
	d.prof.mu.Unlock()

	log := d.cfg.Logger
	go func() {
		// Programs that appeared before the queue existed.
		if _, err := prof.Symbolizer().LearnAll(); err != nil {
			log.Warn("profiling: learn loaded programs", "err", err)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-learn:
				if err := prof.Symbolizer().Learn(id); err != nil && !errors.Is(err, os.ErrNotExist) {
					log.Debug("profiling: learn program", "id", id, "err", err)
				}
			}
		}
	}()
	go d.expireProfiles(ctx)
	if cfg.Every > 0 {
		go func() {
			emit := func(w *profile.Window, err error) {
				var p *pprof.Profile
				if w != nil {
					p = w.Profile
				}
				d.profileWindow(p, err)
				d.profileLost(w)
				d.sampledWindowEnds(ctx, w) // sampled perf counters (counters_sampled.go)
			}
			if err := prof.Run(ctx, cfg.Every, cfg.Duration, emit); err != nil {
				d.setProfileError(err)
				log.Warn("continuous CPU profiling stopped", "err", err)
			}
		}()
	}
	log.Info("CPU profiling on", "event", event, "hz", cfg.Hz, "every", cfg.Every, "window", cfg.Duration, "limit", cfg.Limit)
	return nil
}

// learnProfile tells the symbolizer about a program that just appeared.
// The sampler calls it under its lock: the id is queued for the learner
// goroutine (a full queue drops it; the sampler's Observe learns programs
// it finds in samples anyway).
func (d *Daemon) learnProfile(id uint32) {
	d.prof.mu.Lock()
	ch := d.prof.learn
	d.prof.mu.Unlock()
	if ch == nil {
		return // not started: startProfiling learns every loaded program
	}
	select {
	case ch <- id:
	default:
	}
}

// profileWindow stores one continuous window and keeps its program shares
// for the progs view.
func (d *Daemon) profileWindow(p *pprof.Profile, err error) {
	if err != nil {
		d.setProfileError(err)
		d.cfg.Logger.Warn("profiling window", "err", err)
		return
	}
	end := time.Unix(0, p.TimeNanos+p.DurationNanos)
	build := time.Since(end)
	shares, serr := profile.ProgramShares(p)
	nanos, _ := profile.ProgramNanos(p) // fails as ProgramShares does
	info, id, err := d.storeProfile(p, store.ProfileContinuous)
	known := map[uint32]bool{}
	for _, id := range d.prof.prof.Symbolizer().Programs() {
		known[id] = true
	}
	pr := &d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.windows++
	if pr.cpuNs == nil {
		pr.cpuNs = map[uint32]int64{}
	}
	for id, ns := range nanos {
		pr.cpuNs[id] += ns
	}
	for id := range pr.cpuNs {
		if !known[id] && nanos[id] == 0 {
			delete(pr.cpuNs, id) // unloaded: its series leaves /metrics
		}
	}
	pr.covered, pr.known = pr.known, known
	pr.shares, pr.lastEnd, pr.lastBuild = shares, end, build
	if serr != nil {
		pr.shares = nil
	}
	info.ID = id
	pr.last = info
	pr.lastErr = err
	if err != nil {
		// Log a failing store once, not every window.
		if !pr.storeFailed {
			d.cfg.Logger.Warn("store profile", "err", err)
		}
		pr.storeFailed = true
	} else {
		pr.storeFailed = false
	}
}

// profileLost adds up the samples each capture of a window lost.
func (d *Daemon) profileLost(w *profile.Window) {
	if w == nil {
		return
	}
	pr := &d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.lost == nil {
		pr.lost = map[string]uint64{}
	}
	for ev, st := range w.Stats {
		pr.lost[ev.String()] += st.Lost
	}
}

// storeProfile stores p and returns its info and id.
func (d *Daemon) storeProfile(p *pprof.Profile, kind string) (store.ProfileInfo, string, error) {
	info := store.ProfileInfo{
		Start: time.Unix(0, p.TimeNanos), Duration: p.DurationNanos, Kind: kind,
		Event: profileEvent(p), Hz: d.prof.cfg.Hz, Samples: sampleCount(p),
	}
	data, err := profile.Marshal(p)
	if err != nil {
		return info, "", err
	}
	info.Bytes = len(data)
	id, err := d.store.PutProfile(info, data)
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

func sampleCount(p *pprof.Profile) int64 {
	var n int64
	for _, s := range p.Sample {
		if len(s.Value) > 0 {
			n += s.Value[0]
		}
	}
	return n
}

func (d *Daemon) setProfileError(err error) {
	d.prof.mu.Lock()
	d.prof.lastErr = err
	d.prof.mu.Unlock()
}

// expireProfiles deletes profiles past their retention once a minute.
func (d *Daemon) expireProfiles(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := d.store.ExpireProfiles(d.now(), d.prof.cfg.Retention); err != nil {
			d.cfg.Logger.Warn("expire profiles", "err", err)
		} else if n > 0 {
			d.cfg.Logger.Debug("expired profiles", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// profiler returns the running profiler, or an error saying why there is
// none.
func (d *Daemon) profiler() (*profile.Profiler, error) {
	d.prof.mu.Lock()
	defer d.prof.mu.Unlock()
	if d.prof.prof == nil {
		return nil, fmt.Errorf("%w: the daemon could not start it (see its log)", ErrProfilingOff)
	}
	return d.prof.prof, nil
}

// sampledCPU is a program's share of sampled CPU time in the latest
// continuous window, nil when no recent window covers it.
func (d *Daemon) sampledCPU(id uint32) *float64 {
	pr := &d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.shares == nil || d.now().Sub(pr.lastEnd) > 2*pr.cfg.Every+10*time.Second {
		return nil
	}
	v, ok := pr.shares[id]
	if !ok && !pr.covered[id] {
		return nil
	}
	return &v
}

// profilingStatus reports profiling in /v1/status, nil when off.
func (d *Daemon) profilingStatus() *api.ProfilingStatus {
	pr := &d.prof
	pr.mu.Lock()
	if pr.prof == nil {
		pr.mu.Unlock()
		return nil
	}
	st := &api.ProfilingStatus{
		Continuous: pr.cfg.Every > 0, Event: pr.cfg.Event, Hz: pr.cfg.Hz,
		EveryMs: pr.cfg.Every.Milliseconds(), WindowMs: pr.cfg.Duration.Milliseconds(),
		MaxCaptureMs: pr.cfg.Limit.Milliseconds(), RetentionMs: pr.cfg.Retention.Milliseconds(),
		LastProfileID: pr.last.ID, LastProfileStart: pr.last.Start, LastProfileSamples: pr.last.Samples,
		LastProfileBytes: pr.last.Bytes, LastBuildMs: float64(pr.lastBuild.Microseconds()) / 1000,
		Windows: pr.windows, CaptureRunning: pr.capturing.Load(),
	}
	if pr.lastErr != nil {
		st.LastError = pr.lastErr.Error()
	}
	sym := pr.prof.Symbolizer()
	pr.mu.Unlock()
	st.ProgramsKnown = len(sym.Programs())
	st.StoredProfiles, st.StoredBytes, _ = d.store.ProfileBytes()
	return st
}
