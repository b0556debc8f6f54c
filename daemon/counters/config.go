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

// limits are the counters flags' defaults and bounds.
var limits = windowflags.Limits{Prefix: "counters", DefaultWindow: DefaultWindow, DefaultEvery: DefaultEvery, DefaultMax: DefaultMax,
	MinWindow: minCountersWindow, MaxWindow: maxCountersWindow, MaxEvery: maxCountersEvery, MaxMax: maxCountersMax}

func (c Config) withDefaults() Config {
	c.Window, c.Every, c.Max = limits.Defaults(c.Window, c.Every, c.Max)
	return c
}

// Validate checks the counters flags, with defaults for what is unset.
func (c Config) Validate() error {
	c = c.withDefaults()
	return limits.Check(c.Programs, c.Window, c.Every, c.Max)
}

// CheckWindow checks a counting window's length.
func CheckWindow(d time.Duration) error { return limits.CheckWindow(d) }
