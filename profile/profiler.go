package profile

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/pprof/profile"
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
	// WindowStarts, if set, is called by Run just before each continuous
	// window's capture starts, so callers can take readings (run counts,
	// other events) over the same window. It must not block.
	WindowStarts func(start time.Time)
}

// Profiler is what the daemon runs: continuous profiling in bounded
// windows (Run) and on-demand captures (Capture), both symbolized by one
// Symbolizer. It holds no BPF program; between windows it holds only its
// disabled perf events.
type Profiler struct {
	cfg      ProfilerConfig
	sym      *Symbolizer
	onDemand atomic.Bool
}

// NewProfiler checks the configuration and that the kernel lets it sample
// (it opens and closes the perf events once): it fails with ErrNoPMU when
// the event needs a PMU the host lacks, and with ErrBadRate for a bad Hz.
func NewProfiler(cfg ProfilerConfig) (*Profiler, error) {
	p := &Profiler{cfg: cfg, sym: cfg.Symbolizer}
	if p.sym == nil {
		p.sym = NewSymbolizer(SymbolizerConfig{ProcRoot: cfg.Sampler.ProcRoot})
	}
	p.cfg.Sampler.Symbolizer = p.sym
	s, err := NewSampler(p.cfg.Sampler)
	if err != nil {
		return nil, err
	}
	p.cfg.Sampler = s.cfg
	s.Close()
	return p, nil
}

// Symbolizer returns the profiler's symbolizer, for Learn.
func (p *Profiler) Symbolizer() *Symbolizer { return p.sym }

// MaxDuration is the longest on-demand capture.
func (p *Profiler) MaxDuration() time.Duration { return p.cfg.Sampler.MaxDuration }

// Run profiles continuously until ctx ends: every `every` it captures a
// window of `window` (window == every leaves no gap), builds a profile of
// it and hands it to emit, then forgets programs gone since the previous
// window (Symbolizer.Prune). A window that fails is handed to emit as an
// error; when ctx ends mid-window, the part taken so far is emitted. Run
// returns nil when ctx ends, or an error when it cannot sample at all.
// window must be within [MinDuration, every].
func (p *Profiler) Run(ctx context.Context, every, window time.Duration, emit func(*profile.Profile, error)) error {
	if err := CheckDuration(window, every); err != nil {
		return err
	}
	s, err := NewSampler(p.cfg.Sampler)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		start := time.Now()
		if p.cfg.WindowStarts != nil {
			p.cfg.WindowStarts(start)
		}
		c, err := s.Capture(ctx, window)
		switch {
		case c != nil && c.Duration >= MinDuration:
			prof, berr := Build(c, p.sym, p.cfg.Build)
			emit(prof, berr)
		case err != nil && ctx.Err() == nil:
			emit(nil, err)
		}
		if _, err := p.sym.Prune(); err != nil && ctx.Err() == nil {
			emit(nil, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every - time.Since(start)):
		}
	}
}

// Capture takes an on-demand profile of d with perf events of its own,
// opened for the capture and closed after it, so continuous windows go on
// meanwhile. One runs at a time: another call fails with ErrBusy. d must
// be within [MinDuration, MaxDuration] (ErrBadDuration). When ctx ends
// first, Capture fails with ctx's error.
func (p *Profiler) Capture(ctx context.Context, d time.Duration) (*profile.Profile, error) {
	if err := CheckDuration(d, p.cfg.Sampler.MaxDuration); err != nil {
		return nil, err
	}
	if !p.onDemand.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("capture: %w", ErrBusy)
	}
	defer p.onDemand.Store(false)
	s, err := NewSampler(p.cfg.Sampler)
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
