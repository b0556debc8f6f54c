package counters

import (
	"time"

	"github.com/bpfperf/bpfperf/daemon/windowflags"
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

// limits bound the counters flags.
var limits = windowflags.Limits{Prefix: "counters", MinWindow: minCountersWindow, MaxWindow: maxCountersWindow, MaxEvery: maxCountersEvery, MaxMax: maxCountersMax}

// Validate checks the counters flags, with defaults for what is unset.
func (c Config) Validate() error {
	c = c.withDefaults()
	return limits.Check(c.Programs, c.Window, c.Every, c.Max)
}

// CheckWindow checks a counting window's length.
func CheckWindow(d time.Duration) error { return limits.CheckWindow(d) }
