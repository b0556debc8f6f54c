package daemon

import (
	"fmt"
	"time"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// ProfileConfig configures continuous and on-demand profiling.
type ProfileConfig struct {
	// Every is how often a continuous window starts; 0 turns continuous
	// profiling off (on-demand captures still work).
	Every time.Duration
	// Duration is each window's length, at most Every; 0 means Every (no
	// gap between windows).
	Duration time.Duration
	// Hz is the sampling frequency per CPU; 0 means 99.
	Hz int
	// Limit is the longest on-demand capture; 0 means DefaultProfileLimit.
	Limit time.Duration
	// Retention is how long profiles are kept; 0 means
	// DefaultRetentionProfiles.
	Retention time.Duration
	// Event is what samples are taken on: "cpu-clock" (the default, every
	// kernel has it), or "cycles", "instructions" or "llc-misses", which
	// need a hardware PMU and fall back to cpu-clock, with a warning that
	// says why, where they do not open.
	Event string
}

// Defaults for the profiling flags.
const (
	DefaultProfileEvery      = time.Minute
	DefaultProfileHz         = profile.DefaultHz
	DefaultProfileLimit      = 5 * time.Minute
	DefaultRetentionProfiles = 7 * 24 * time.Hour

	// maxMergeProfiles bounds one merge request; a week of one-minute
	// windows is 10,080.
	maxMergeProfiles = 20_000
	// mergeBatch is how many profiles a merge reads and parses at once, so
	// its memory stays that of the merged profile plus a batch.
	mergeBatch = 32
)

// Validate checks the profiling flags and fills defaults. bpfperfd calls it
// while parsing flags, so a bad value stops it with one line; the daemon
// calls it again before profiling.
func (c *ProfileConfig) Validate() error {
	if c.Event == "" {
		c.Event = perfevent.CPUClock.String()
	}
	ev, err := perfevent.Parse(c.Event)
	if err != nil {
		return fmt.Errorf("%w: --profile.event: %w", ErrBadConfig, err)
	}
	c.Event = ev.String()
	if c.Hz == 0 {
		c.Hz = DefaultProfileHz
	}
	if c.Limit == 0 {
		c.Limit = DefaultProfileLimit
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetentionProfiles
	}
	if c.Duration == 0 {
		c.Duration = c.Every
	}
	window := func(name string, d time.Duration) error {
		if d < profile.MinDuration || d > store.MaxProfileDuration {
			return fmt.Errorf("%w: --profile.%s %v is outside %v..%v", ErrBadConfig, name, d, profile.MinDuration, store.MaxProfileDuration)
		}
		return nil
	}
	switch {
	case c.Every < 0:
		return fmt.Errorf("%w: --profile.every %v is negative (0 turns continuous profiling off)", ErrBadConfig, c.Every)
	case c.Every > 0:
		if err := window("every", c.Every); err != nil {
			return err
		}
		if err := window("duration", c.Duration); err != nil {
			return err
		}
		if c.Duration > c.Every {
			return fmt.Errorf("%w: --profile.duration %v is longer than --profile.every %v", ErrBadConfig, c.Duration, c.Every)
		}
	}
	if c.Hz < 1 || c.Hz > profile.MaxHz {
		return fmt.Errorf("%w: --profile.hz %d is outside 1..%d", ErrBadConfig, c.Hz, profile.MaxHz)
	}
	if err := window("limit", c.Limit); err != nil {
		return err
	}
	if c.Retention < time.Second {
		return fmt.Errorf("%w: --retention.profiles %v is shorter than 1s", ErrBadConfig, c.Retention)
	}
	return nil
}
