// Package daemon runs bpfperfd: it turns BPF run-time stats on, samples every
// loaded program each interval, stores the series and serves them over a
// unix socket. The API's documents and the client the CLI uses are in
// package api; daemon/query builds them, where a layer's type is not
// already the API's (api.Meta is collectors.Meta, api.Event is
// store.Event, ...).
package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/httpapi"
	"github.com/bpfperf/bpfperf/daemon/latency"
	"github.com/bpfperf/bpfperf/daemon/mapwatch"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/regressions"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/store"
)

// Config is everything bpfperfd needs; cmd/bpfperfd builds it from flags.
type Config struct {
	StateDir    string // holds bpfperf.db
	Socket      string // unix socket path for the API
	SocketGroup string // group owning the socket, if it exists
	// HostLock is the file held locked while the daemon runs, one daemon
	// per host (hostlock.go); "" or "none" runs without it.
	HostLock string
	// HostLockWait is how long a daemon waits for the host lock another
	// holds before it gives up (0: it does not wait).
	HostLockWait time.Duration
	Interval     time.Duration // sampling interval
	StatsMode    string        // "auto", "fd" or "sysctl"
	// StatsDuty is a fixed percent of each interval stats are on
	// (sampler/duty.go); 100 keeps them on all the time, 0 leaves the share
	// to StatsBudget.
	StatsDuty int
	// StatsBudget is the % of one CPU that stats may cost the host's
	// programs (sampler/budget.go): stats stay on all the time within it
	// and for the share that keeps within it when not; 0 turns it off.
	StatsBudget float64
	Sweep       string // how programs are read: "auto" (iterator, else fd), "iter" or "fd"
	ProcRoot    string // usually /proc
	// CPUsOnlineFile lists the online CPUs (/sys/devices/system/cpu/online);
	// a change re-measures stats' cost. Tests point it at a file of theirs.
	CPUsOnlineFile string
	// BPFFS is where pinned objects are looked for, to charge objects no
	// process holds to their pin path; usually /sys/fs/bpf.
	BPFFS string
	// CRISocket is the container runtime's CRI socket, which names
	// containers by their pods (daemon/podnames): "" for the first of
	// the usual ones that exists, "none" for none.
	CRISocket   string
	OwnersEvery time.Duration // how often owners and attach points are refreshed
	Retention   store.Retention
	Profile     ProfileConfig // CPU profiling (daemon/profiling)
	Version     string
	Logger      *slog.Logger
	Counters    CountersConfig
	Latency     LatencyConfig // latency windows (daemon/latency)
	Web         WebConfig     // the opt-in TCP listener (daemon/httpapi)
	// Maps (daemon/mapwatch): how often every map is read, the window over which
	// steady growth is a leak, and the keys one reading may walk.
	MapsEvery      time.Duration
	MapsLeakWindow time.Duration
	MapsWalkBudget int
	// Regressions configures detection (regressions.go); a zero Window
	// turns it off.
	Regressions regress.Config
	// Now is the daemon's clock: when each sweep is read (so the rates),
	// when exact counter windows open and close, how fresh the latest
	// profile window is, retention, and the defaults of since and until;
	// nil is time.Now. Waits, measured durations and the profiler's own
	// windows use the real clock.
	Now func() time.Time

	// PanicAfter makes the sampler panic after this long; tests use it to
	// check that a panic still restores the stats sysctl.
	PanicAfter time.Duration
	// SweepFailLoad makes the iterator sweep's load fail, as on a kernel
	// that refuses it; tests use it to check the fallback.
	SweepFailLoad bool
	// LinksFailReads makes the first N readings of BPF links fail, as a
	// link being set up makes one fail (tests: an identity must not be
	// fixed without the attach point such a reading missed).
	LinksFailReads int
}

// Defaults for flags.
const (
	DefaultStateDir = "/var/lib/bpfperf"
	DefaultSocket   = api.DefaultSocket
	DefaultInterval = time.Second
	DefaultGroup    = "bpfperf"

	DefaultRetentionRaw    = 7 * 24 * time.Hour
	DefaultRetentionRollup = 400 * 24 * time.Hour
	expireEvery            = 10 * time.Minute
	// StoreFile is the store file's name in the state dir.
	StoreFile = "bpfperf.db"

	minInterval = 100 * time.Millisecond
	maxInterval = time.Hour
)

// validate checks the flags and fills defaults.
func (c *Config) validate() error {
	if c.Interval < minInterval || c.Interval > maxInterval {
		return fmt.Errorf("%w: --interval %v is outside %v..%v", ErrBadConfig, c.Interval, minInterval, maxInterval)
	}
	switch c.StatsMode {
	case "auto", "fd", "sysctl":
	default:
		return fmt.Errorf("%w: --stats-mode %q is not one of auto, fd, sysctl", ErrBadConfig, c.StatsMode)
	}
	if c.StatsDuty < 0 || c.StatsDuty > 100 {
		return fmt.Errorf("%w: --stats.duty %d%% is outside 1%%..100%%", ErrBadConfig, c.StatsDuty)
	}
	if c.StatsBudget < 0 || c.StatsBudget > 100 {
		return fmt.Errorf("%w: --stats.budget %g%% is outside 0%%..100%% of one CPU", ErrBadConfig, c.StatsBudget)
	}
	switch c.Sweep {
	case "":
		c.Sweep = sampler.SweepAuto
	case sampler.SweepAuto, sampler.SweepIter, sampler.SweepFd:
	default:
		return fmt.Errorf("%w: --sweep %q is not one of auto, iter, fd", ErrBadConfig, c.Sweep)
	}
	if c.Retention.Raw == 0 {
		c.Retention.Raw = DefaultRetentionRaw
	}
	if c.Retention.Minute == 0 {
		c.Retention.Minute = store.DefaultMinuteDays * 24 * time.Hour
	}
	if c.Retention.Rollup == 0 {
		c.Retention.Rollup = DefaultRetentionRollup
	}
	if r := c.Retention; r.Raw < time.Hour || r.Minute < r.Raw || r.Rollup < r.Minute {
		return fmt.Errorf("%w: retention must grow with coarseness: --retention.raw %v (at least 1h) <= --retention.minute %v <= --retention.rollup %v", ErrBadConfig, r.Raw, r.Minute, r.Rollup)
	}
	if err := c.Web.Validate(); err != nil {
		return err
	}
	if err := c.validateMaps(); err != nil {
		return err
	}
	if c.BPFFS == "" {
		c.BPFFS = "/sys/fs/bpf"
	}
	if err := regressions.Validate(&c.Regressions); err != nil {
		return err
	}
	if c.CPUsOnlineFile == "" {
		c.CPUsOnlineFile = "/sys/devices/system/cpu/online"
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.OwnersEvery == 0 {
		// Scanning /proc/*/fdinfo costs ~30 µs per BPF fd on the host;
		// new programs trigger a scan anyway (see sampler.tick).
		c.OwnersEvery = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// The rooms' configurations and flag defaults, as cmd/bpfperfd names them.
type (
	WebConfig      = httpapi.WebConfig // the opt-in TCP listener
	CountersConfig = counters.Config   // which programs are counted and how
	LatencyConfig  = latency.Config    // which programs' runs are timed and how
	ProfileConfig  = profiling.Config  // continuous and on-demand profiling
)

const (
	DefaultWebMaxPrograms      = httpapi.DefaultWebMaxPrograms
	DefaultWebMaxRequests      = httpapi.DefaultWebMaxRequests
	DefaultRegressionWindow    = regressions.DefaultWindow
	DefaultRegressionMinChange = regressions.DefaultMinChange
	DefaultRegressionAlpha     = regressions.DefaultAlpha
	DefaultCountersWindow      = counters.DefaultWindow
	DefaultCountersEvery       = counters.DefaultEvery
	DefaultCountersMax         = counters.DefaultMax
	DefaultLatencyWindow       = latency.DefaultWindow
	DefaultLatencyMax          = latency.DefaultMax
	DefaultLatencyEvent        = latency.DefaultEvent
	DefaultProfileEvery        = profiling.DefaultEvery
	DefaultProfileHz           = profiling.DefaultHz
	DefaultProfileFilter       = profiling.DefaultFilter
	DefaultProfileLimit        = profiling.DefaultLimit
	DefaultRetentionProfiles   = profiling.DefaultRetention
	DefaultMapsEvery           = mapwatch.DefaultEvery
	DefaultMapsLeakWindow      = mapwatch.DefaultLeakWindow
)

// validateMaps checks the map flags and fills their defaults.
func (c *Config) validateMaps() error {
	m := mapwatch.Config{Every: c.MapsEvery, LeakWindow: c.MapsLeakWindow, WalkBudget: c.MapsWalkBudget}
	if err := m.Validate(); err != nil {
		return err
	}
	c.MapsEvery, c.MapsLeakWindow = m.Every, m.LeakWindow
	return nil
}

// ParseBudget reads --stats.budget: "N%" or "N", a percent of one CPU in
// 0..100 ("0" or "off": no budget).
func ParseBudget(s string) (float64, error) { return sampler.ParseBudget(s) }

// ParseDuty reads --stats.duty: "N%" or "N", a whole percent in 1..100.
func ParseDuty(s string) (int, error) { return sampler.ParseDuty(s) }

// checkPaths checks the state dir and the socket's directory.
func (c *Config) checkPaths() error {
	fi, err := os.Stat(c.StateDir)
	if err != nil {
		return fmt.Errorf("%w: state dir: %w", ErrBadConfig, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: state dir %s is not a directory", ErrBadConfig, c.StateDir)
	}
	probe, err := os.CreateTemp(c.StateDir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("%w: state dir %s is not writable: %w", ErrBadConfig, c.StateDir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if dir := filepath.Dir(c.Socket); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("%w: socket directory: %w", ErrBadConfig, err)
		}
	}
	return nil
}
