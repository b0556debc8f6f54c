package stat

import (
	"context"
	"errors"
	"fmt"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
)

// MaxProfiled is the longest span one run's profile covers: samples are
// kept in memory until the command ends (99 Hz on each CPU).
const MaxProfiled = time.Hour

// Profiler samples every CPU's kernel stacks on cpu-clock while a command
// runs (--profile), with the perf events of its own, opened once and
// closed by Close. Its profiles are symbolized to source lines as the
// daemon's are, programs the command loads and unloads included (the
// symbolizer learns them while they run).
type Profiler struct {
	sampler *profile.Sampler
	sym     *profile.Symbolizer
}

// NewProfiler opens the sampler.
func NewProfiler() (*Profiler, error) {
	sym := profile.NewSymbolizer(profile.SymbolizerConfig{})
	s, err := profile.NewSampler(profile.SamplerConfig{Event: perfevent.CPUClock, MaxDuration: MaxProfiled, Symbolizer: sym})
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return &Profiler{sampler: s, sym: sym}, nil
}

// Close releases the perf events.
func (p *Profiler) Close() error { return p.sampler.Close() }

// Wrap returns run with sampling around it: from just before it starts to
// when it ends. profiled then builds that run's profile (nil for a run
// shorter than profile.MinDuration, with the reason).
func (p *Profiler) Wrap(run Run) (wrapped Run, profiled func() (*pprof.Profile, error)) {
	var captured chan capture
	wrapped = func(ctx context.Context) (func() int, error) {
		cctx, stop := context.WithCancel(ctx)
		captured = make(chan capture, 1)
		go func() {
			c, err := p.sampler.Capture(cctx, MaxProfiled)
			captured <- capture{c, err}
		}()
		wait, err := run(ctx)
		if err != nil {
			stop()
			<-captured
			return nil, err
		}
		return func() int {
			code := wait()
			stop()
			return code
		}, nil
	}
	profiled = func() (*pprof.Profile, error) {
		c := <-captured
		if c.err != nil && !errors.Is(c.err, context.Canceled) {
			return nil, c.err
		}
		if c.c == nil || c.c.Duration < profile.MinDuration {
			return nil, fmt.Errorf("--profile: the command ran under %v, too short to sample", profile.MinDuration)
		}
		return profile.Build(c.c, p.sym, profile.BuildOptions{})
	}
	return wrapped, profiled
}

type capture struct {
	c   *profile.Capture
	err error
}
