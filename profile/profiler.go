package profile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// ProfilerConfig configures a Profiler.
type ProfilerConfig struct {
	// Sampler says what to sample (Event, Hz, CPUs, roots); its
	// MaxDuration limits on-demand captures. Its Symbolizer is ignored:
	// the profiler's is used.
	Sampler SamplerConfig
	// Build tunes the profiles built of each capture.
	Build BuildOptions
	// Symbolizer is shared with whoever calls Learn; nil makes a new one.
	Symbolizer *Symbolizer
	// Events are sampled beside Sampler.Event over every continuous window
	// (Run), each with samplers of its own: the hardware events where a
	// PMU exists. One that does not open is left out, and EventErrors says
	// why; the others go on.
	Events []perfevent.Event
	// WindowStarts, if set, is called by Run as each continuous window's
	// sampling starts (its events on, after the filter is set up), so
	// callers can take readings (run counts) over the same window. It
	// must not block.
	WindowStarts func(start time.Time)
	// Loaded is the new Symbolizer's SymbolizerConfig.Loaded.
	Loaded func() (ids []uint32, ok bool)
}

// Window is what one continuous window gave: the profile of the main
// event and, over the same window, one of each other event that opened.
type Window struct {
	Profile *profile.Profile
	// Events holds the profiles of ProfilerConfig.Events, for those that
	// captured this window; Errs says why the others did not.
	Events map[perfevent.Event]*profile.Profile
	Errs   map[perfevent.Event]error
	// Stats are each capture's figures, the main event's included.
	Stats map[perfevent.Event]CaptureStats
}

// CaptureStats are what a capture says of itself: the rate in force, how
// many samples it took and lost, how often the kernel throttled it, and
// its share of time on the PMU.
type CaptureStats struct {
	Hz           int
	Samples      int
	Lost         uint64
	Throttled    uint64
	RunningShare float64
	Filter       FilterStats
	Drains       Drains
}

// Stats are the capture's figures.
func (c *Capture) Stats() CaptureStats {
	return CaptureStats{Hz: c.Hz, Samples: len(c.Samples), Lost: c.Lost, Throttled: c.Throttled, RunningShare: c.RunningShare, Filter: c.Filter, Drains: c.Drains}
}

// Profiler is what the daemon runs: continuous profiling in bounded
// windows (Run) and on-demand captures (Capture), both symbolized by one
// Symbolizer. It holds no BPF program; between windows it holds only its
// disabled perf events.
type Profiler struct {
	cfg      ProfilerConfig
	sym      *Symbolizer
	onDemand atomic.Bool
	// events are the ProfilerConfig.Events that opened when NewProfiler
	// tried them; eventErrs says why the others did not.
	events    []perfevent.Event
	eventErrs map[perfevent.Event]error
	scrapes   *scrapes
}

// NewProfiler checks the configuration and that the kernel lets it sample
// (it opens and closes the perf events once, the main event's and each of
// Events'): it fails with a *perfevent.OpenError matching
// perfevent.ErrNoPMU when the main event needs a PMU the host lacks, and
// with ErrBadRate for a bad Hz. Events that do not open only show in
// EventErrors.
func NewProfiler(cfg ProfilerConfig) (*Profiler, error) {
	p := &Profiler{cfg: cfg, sym: cfg.Symbolizer, eventErrs: map[perfevent.Event]error{}, scrapes: newScrapes()}
	if p.sym == nil {
		p.sym = NewSymbolizer(SymbolizerConfig{ProcRoot: cfg.Sampler.ProcRoot, Loaded: cfg.Loaded})
	}
	p.cfg.Sampler.Symbolizer = p.sym
	// The events are tried without the kernel filter: whether an event
	// opens does not depend on it (an event that refuses the filter
	// samples unfiltered), and loading it once for each made the daemon's
	// profiling start 4 loads slower, before its API answers (issue 46).
	probe := p.cfg.Sampler
	probe.Filter = nil
	s, err := NewSampler(probe)
	if err != nil {
		return nil, err
	}
	p.cfg.Sampler = s.cfg // with its defaults filled in
	p.cfg.Sampler.Filter = cfg.Sampler.Filter
	s.Close()
	for _, ev := range cfg.Events {
		if slices.Contains(p.events, ev) {
			continue
		}
		probe := p.eventConfig(ev)
		probe.Filter = nil
		es, err := NewSampler(probe)
		if err != nil {
			p.eventErrs[ev] = err
			continue
		}
		es.Close()
		p.events = append(p.events, ev)
	}
	return p, nil
}

// eventConfig is the sampler configuration of one of Events.
func (p *Profiler) eventConfig(ev perfevent.Event) SamplerConfig {
	c := p.cfg.Sampler
	c.Event = ev
	return c
}

// Event is the main event, the one of on-demand captures and of
// Window.Profile.
func (p *Profiler) Event() perfevent.Event { return p.cfg.Sampler.Event }

// Events are the other events sampled over each continuous window: those
// of ProfilerConfig.Events that opened.
func (p *Profiler) Events() []perfevent.Event { return p.events }

// EventErrors says why each of ProfilerConfig.Events left out did not
// open (a *perfevent.OpenError, usually).
func (p *Profiler) EventErrors() map[perfevent.Event]error { return p.eventErrs }

// Symbolizer returns the profiler's symbolizer, for Learn.
func (p *Profiler) Symbolizer() *Symbolizer { return p.sym }

// MaxDuration is the longest on-demand capture.
func (p *Profiler) MaxDuration() time.Duration { return p.cfg.Sampler.MaxDuration }

// Run profiles continuously until ctx ends: every `every` it captures a
// window of `window` (window == every leaves no gap) on the main event and
// on each of Events at once, builds a profile of each and hands them to
// emit, then forgets programs gone since the previous window
// (Symbolizer.Prune). Every capture of a window has ended before the next
// window starts, so each window carries every event. A window whose main
// capture fails is handed to emit as an error; when ctx ends mid-window,
// the part taken so far is emitted. Run returns nil when ctx ends, or an
// error when it cannot sample at all. window must be within
// [MinDuration, every].
func (p *Profiler) Run(ctx context.Context, every, window time.Duration, emit func(*Window, error)) error {
	if err := CheckDuration(window, every); err != nil {
		return err
	}
	s, err := NewSampler(p.cfg.Sampler)
	if err != nil {
		return err
	}
	defer s.Close()
	s.tap = p.scrapes
	p.scrapes.run(nil)
	defer p.scrapes.run(fmt.Errorf("continuous profiling stopped: %w", ErrClosed))
	others := map[perfevent.Event]*Sampler{}
	failed := map[perfevent.Event]error{} // opened in NewProfiler, not now
	for _, ev := range p.events {
		es, err := NewSampler(p.eventConfig(ev))
		if err != nil {
			failed[ev] = err
			continue
		}
		defer es.Close()
		others[ev] = es
	}
	for {
		start := time.Now()
		w := &Window{Events: map[perfevent.Event]*profile.Profile{}, Errs: maps.Clone(failed), Stats: map[perfevent.Event]CaptureStats{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for ev, es := range others {
			wg.Go(func() {
				prof, stats, err := p.captureBuild(ctx, es, window)
				mu.Lock()
				defer mu.Unlock()
				w.Stats[ev] = stats
				if err != nil {
					w.Errs[ev] = err
					return
				}
				w.Events[ev] = prof
			})
		}
		// The window's readings start with its samples, not before: the
		// kernel filter's set-up, first, took 250 ms of a 1 s window here
		// (its runs read 25% high against its samples).
		c, err := s.captureBounded(ctx, window, func() {
			if p.cfg.WindowStarts != nil {
				p.cfg.WindowStarts(time.Now())
			}
		})
		wg.Wait()
		switch {
		case c != nil && c.Duration >= MinDuration:
			prof, berr := Build(c, p.sym, p.cfg.Build)
			w.Profile, w.Stats[s.Event()] = prof, c.Stats()
			emit(w, berr)
		case err != nil && ctx.Err() == nil:
			emit(nil, err)
		}
		if _, err := p.sym.Prune(); err != nil && ctx.Err() == nil {
			emit(nil, err)
		}
		if !p.sampleGap(ctx, s, start.Add(every)) {
			return nil
		}
	}
}

// sampleGap waits for the next window to start at next, sampling on s in
// the meantime while a scrape needs samples (the samples go to the
// scrapes only). It returns false when ctx ends first.
func (p *Profiler) sampleGap(ctx context.Context, s *Sampler, next time.Time) bool {
	for {
		wait := time.Until(next)
		if wait <= 0 {
			return ctx.Err() == nil
		}
		if p.scrapes.pending() {
			s.capture(ctx, wait, nil)
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		case <-p.scrapes.wake:
		}
	}
}

// captureBuild captures d on s and builds the profile.
func (p *Profiler) captureBuild(ctx context.Context, s *Sampler, d time.Duration) (*profile.Profile, CaptureStats, error) {
	c, err := s.Capture(ctx, d)
	if c == nil || c.Duration < MinDuration {
		if err == nil {
			err = fmt.Errorf("capture %v: %w", s.Event(), ErrBadDuration)
		}
		return nil, CaptureStats{}, err
	}
	prof, err := Build(c, p.sym, p.cfg.Build)
	return prof, c.Stats(), err
}

// Capture takes an on-demand profile of d on event ev (the main event's
// configuration otherwise) with perf events of its own, opened for the
// capture and closed after it, so continuous windows go on meanwhile. One
// runs at a time: another call fails with ErrBusy. d must be within
// [MinDuration, MaxDuration] (ErrBadDuration). An event that does not open
// fails with its *perfevent.OpenError. When ctx ends first, Capture fails
// with ctx's error.
func (p *Profiler) Capture(ctx context.Context, ev perfevent.Event, d time.Duration) (*profile.Profile, error) {
	if err := CheckDuration(d, p.cfg.Sampler.MaxDuration); err != nil {
		return nil, err
	}
	if !p.onDemand.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("capture: %w", ErrBusy)
	}
	defer p.onDemand.Store(false)
	s, err := NewSampler(p.eventConfig(ev))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c, err := s.Capture(ctx, d)
	if err != nil {
		if errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("capture: %w", err)
		}
		return nil, err
	}
	return Build(c, p.sym, p.cfg.Build)
}
