package counters

import (
	"fmt"
	"path"
	"time"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// Config configures which programs are counted and how.
type Config struct {
	// Programs are names or globs (path.Match syntax) of programs counted
	// when they appear.
	Programs []string
	Window   time.Duration // how long each counting window lasts
	Every    time.Duration // how often a target's window starts (at least Window)
	Max      int           // targets counted at once; each adds cost to every run
}

// Counter defaults and limits.
const (
	DefaultWindow = 10 * time.Second
	DefaultEvery  = time.Minute
	DefaultMax    = 4

	minCountersWindow = 100 * time.Millisecond
	maxCountersWindow = time.Hour
	maxCountersEvery  = 24 * time.Hour
	maxCountersMax    = 64
)

func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Every == 0 {
		c.Every = max(DefaultEvery, c.Window)
	}
	if c.Max == 0 {
		c.Max = DefaultMax
	}
	return c
}

// Validate checks the counters flags, with defaults for what is unset.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := CheckWindow(c.Window); err != nil {
		return fmt.Errorf("%w: --counters.window %w", errs.BadConfig, err)
	}
	if c.Every < c.Window || c.Every > maxCountersEvery {
		return fmt.Errorf("%w: --counters.every %v must be between --counters.window (%v) and %v", errs.BadConfig, c.Every, c.Window, maxCountersEvery)
	}
	if c.Max < 1 || c.Max > maxCountersMax {
		return fmt.Errorf("%w: --counters.max %d is outside 1..%d", errs.BadConfig, c.Max, maxCountersMax)
	}
	for _, g := range c.Programs {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("%w: --counters.programs %q is not a name or glob", errs.BadConfig, g)
		}
	}
	return nil
}

// CheckWindow checks a counting window's length.
func CheckWindow(d time.Duration) error {
	if d < minCountersWindow || d > maxCountersWindow {
		return fmt.Errorf("%v is outside %v..%v", d, minCountersWindow, maxCountersWindow)
	}
	return nil
}
