package profiling

import (
	"fmt"
	"time"

	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// Config configures continuous and on-demand profiling.
type Config struct {
	// Every is how often a continuous window starts; 0 turns continuous
	// profiling off (on-demand captures still work).
	Every time.Duration
	// Duration is each window's length, at most Every; 0 means Every (no
	// gap between windows).
	Duration time.Duration
	// Hz is the sampling frequency per CPU; 0 means 99.
	Hz int
	// Limit is the longest on-demand capture; 0 means DefaultLimit.
	Limit time.Duration
	// Retention is how long profiles are kept; 0 means DefaultRetention.
	Retention time.Duration
	// Event is what samples are taken on: "cpu-clock" (the default, every
	// kernel has it), or "cycles", "instructions" or "llc-misses", which
	// need a hardware PMU and fall back to cpu-clock, with a warning that
	// says why, where they do not open.
	Event string
	// Filter turns the kernel filter on (--profile.filter, on by
	// default): samples outside BPF code are dropped in the kernel, not
	// written to the rings and dropped in user space (issue 46).
	Filter bool
	// Told says the daemon tells the profiler of each new program within
	// a second (Learn: its load records, or a sweep a second), so that
	// filtered windows need not drain every second to look for them
	// (profile.SamplerConfig.Told). Set by the daemon, not a flag.
	Told bool
}

// Defaults for the profiling flags.
const (
	DefaultEvery = time.Minute
	// DefaultFilter is whether the kernel filter is on without
	// --profile.filter.
	DefaultFilter    = true
	DefaultHz        = profile.DefaultHz
	DefaultLimit     = 5 * time.Minute
	DefaultRetention = 7 * 24 * time.Hour

	// MaxMerge bounds one merge request; a week of one-minute windows is
	// 10,080.
	MaxMerge = 20_000
)

// Validate checks the profiling flags and fills defaults. bpfperfd calls it
// while parsing flags, so a bad value stops it with one line; the daemon
// calls it again before profiling.
func (c *Config) Validate() error {
	if c.Event == "" {
		c.Event = perfevent.CPUClock.String()
	}
	ev, err := perfevent.Parse(c.Event)
	if err != nil {
		return fmt.Errorf("%w: --profile.event: %w", errs.BadConfig, err)
	}
	c.Event = ev.String()
	if c.Hz == 0 {
		c.Hz = DefaultHz
	}
	if c.Limit == 0 {
		c.Limit = DefaultLimit
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Duration == 0 {
		c.Duration = c.Every
	}
	window := func(name string, d time.Duration) error {
		if d < profile.MinDuration || d > store.MaxProfileDuration {
			return fmt.Errorf("%w: --profile.%s %v is outside %v..%v", errs.BadConfig, name, d, profile.MinDuration, store.MaxProfileDuration)
		}
		return nil
	}
	switch {
	case c.Every < 0:
		return fmt.Errorf("%w: --profile.every %v is negative (0 turns continuous profiling off)", errs.BadConfig, c.Every)
	case c.Every > 0:
		if err := window("every", c.Every); err != nil {
			return err
		}
		if err := window("duration", c.Duration); err != nil {
			return err
		}
		if c.Duration > c.Every {
			return fmt.Errorf("%w: --profile.duration %v is longer than --profile.every %v", errs.BadConfig, c.Duration, c.Every)
		}
	}
	if c.Hz < 1 || c.Hz > profile.MaxHz {
		return fmt.Errorf("%w: --profile.hz %d is outside 1..%d", errs.BadConfig, c.Hz, profile.MaxHz)
	}
	if err := window("limit", c.Limit); err != nil {
		return err
	}
	if c.Retention < time.Second {
		return fmt.Errorf("%w: --retention.profiles %v is shorter than 1s", errs.BadConfig, c.Retention)
	}
	return nil
}
