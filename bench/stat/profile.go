package stat

import (
	"context"
	"fmt"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/profile"
)

// MaxProfiled is the longest span one run's profile covers: samples are
// kept in memory until the command ends (99 Hz on each CPU).
const MaxProfiled = time.Hour

// Profiler samples every CPU's kernel stacks on cpu-clock while a command
// runs (--profile): a profile.Recorder, opened once and closed by Close.
// Its profiles keep the samples with BPF frames, as the daemon's do.
type Profiler struct {
	rec *profile.Recorder
}

// NewProfiler opens the sampler.
func NewProfiler() (*Profiler, error) {
	rec, err := profile.NewRecorder(profile.RecorderConfig{MaxDuration: MaxProfiled})
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return &Profiler{rec: rec}, nil
}

// Close releases the perf events.
func (p *Profiler) Close() error { return p.rec.Close() }

// Wrap returns run with sampling around it: from just before it starts to
// when it ends. profiled then builds that run's profile (nil for a run
// shorter than profile.MinDuration, with the reason).
func (p *Profiler) Wrap(run Run) (wrapped Run, profiled func() (*pprof.Profile, error)) {
	var span *profile.Span
	wrapped = func(ctx context.Context) (func() int, error) {
		span = p.rec.Start(ctx)
		wait, err := run(ctx)
		if err != nil {
			span.Stop()
			return nil, err
		}
		return func() int {
			code := wait()
			span.Stop()
			return code
		}, nil
	}
	profiled = func() (*pprof.Profile, error) {
		c, err := span.Capture()
		if err != nil {
			return nil, err
		}
		if c.Duration < profile.MinDuration {
			return nil, fmt.Errorf("--profile: the command ran under %v, too short to sample", profile.MinDuration)
		}
		return span.Profile(profile.BuildOptions{})
	}
	return wrapped, profiled
}
