// Package windowflags checks the flags that pick programs for bounded
// windows and say how long and how often they run: --counters.* and
// --latency.* (globs, window, every, max), one set of rules for both.
package windowflags

import (
	"fmt"
	"path"
	"time"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// Limits are one kind of window's defaults and bounds.
type Limits struct {
	Prefix                      string // "counters", "latency": names the flags
	DefaultWindow, DefaultEvery time.Duration
	DefaultMax                  int
	MinWindow, MaxWindow        time.Duration
	MaxEvery                    time.Duration
	MaxMax                      int
}

// Defaults fills in what is unset (zero): a window starts at most as often
// as it lasts.
func (l Limits) Defaults(window, every time.Duration, max int) (time.Duration, time.Duration, int) {
	if window == 0 {
		window = l.DefaultWindow
	}
	if every == 0 {
		every = l.DefaultEvery
		if every < window {
			every = window
		}
	}
	if max == 0 {
		max = l.DefaultMax
	}
	return window, every, max
}

// Check checks the flags, each already with its default.
func (l Limits) Check(programs []string, window, every time.Duration, max int) error {
	if err := l.CheckWindow(window); err != nil {
		return fmt.Errorf("%w: --%s.window %w", errs.BadConfig, l.Prefix, err)
	}
	if every < window || every > l.MaxEvery {
		return fmt.Errorf("%w: --%s.every %v must be between --%s.window (%v) and %v", errs.BadConfig, l.Prefix, every, l.Prefix, window, l.MaxEvery)
	}
	if max < 1 || max > l.MaxMax {
		return fmt.Errorf("%w: --%s.max %d is outside 1..%d", errs.BadConfig, l.Prefix, max, l.MaxMax)
	}
	for _, g := range programs {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("%w: --%s.programs %q is not a name or glob", errs.BadConfig, l.Prefix, g)
		}
	}
	return nil
}

// CheckWindow checks one window's length.
func (l Limits) CheckWindow(d time.Duration) error {
	if d < l.MinWindow || d > l.MaxWindow {
		return fmt.Errorf("%v is outside %v..%v", d, l.MinWindow, l.MaxWindow)
	}
	return nil
}
