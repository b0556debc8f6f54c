// The runtime's monitor thread would otherwise wake every second to see
// whether the CPUs the process may use have changed (Go 1.25's GOMAXPROCS
// updates), on top of the daemon's own tick: on an idle host that was an
// eighth of the daemon's CPU (docs/performance.md). GOMAXPROCS is still
// set from the CPU limit when the daemon starts; a limit changed while it
// runs takes effect at its next start.
//go:debug updatemaxprocs=0

// Command bpfperfd is the bpfperf daemon: it turns on BPF run-time stats,
// samples every loaded program and serves the history over a unix socket.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "bpfperfd: "+err.Error())
		if errors.Is(err, store.ErrCorrupt) {
			os.Exit(daemon.ExitStoreDamaged)
		}
		os.Exit(1)
	}
}

// newApp defines bpfperfd's flags; docs/flags.md is rendered from it.
func newApp() *cli.App {
	return &cli.App{
		Name:    "bpfperfd",
		Usage:   "watch how fast the BPF programs on this host run, and keep the history",
		Version: version,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state-dir", Value: daemon.DefaultStateDir, EnvVars: []string{"STATE_DIRECTORY"}, Usage: "directory of the store file (must exist and be writable)"},
			&cli.StringFlag{Name: "socket", Value: daemon.DefaultSocket, EnvVars: []string{"BPFPERF_SOCKET"}, Usage: "unix socket for the API (mode 0660)"},
			&cli.StringFlag{Name: "host-lock", Value: daemon.DefaultHostLock, EnvVars: []string{"BPFPERF_HOST_LOCK"}, Usage: "file held locked while bpfperfd runs, so a second one on the host is refused (\"none\": run without)"},
			&cli.DurationFlag{Name: "host-lock-wait", Usage: "how long to wait for the host lock while another bpfperfd holds it (a new pod while the old one stops), saying so once, before giving up; 0 refuses at once"},
			&cli.StringFlag{Name: "socket-group", Value: daemon.DefaultGroup, Usage: "group that may use the socket, if it exists"},
			&cli.DurationFlag{Name: "interval", Value: daemon.DefaultInterval, Usage: "sampling interval (100ms to 1h); samples are taken at its whole multiples on the wall clock, where the daemon's other periodic work wakes too"},
			&cli.StringFlag{Name: "stats-mode", Value: "auto", Usage: "how to turn BPF run-time stats on: auto (fd, else sysctl), fd, sysctl"},
			&cli.StringFlag{Name: "stats.budget", Value: "1%", Usage: "what BPF run-time stats may cost the host's programs, in % of one CPU (their runs/s times the cost per run measured at start): stats stay on all the time within it, and on for the share of each interval that keeps within it when not, with runs and run time scaled from that share and marked as estimates; 0 keeps them on all the time"},
			&cli.StringFlag{Name: "stats.duty", Usage: "a fixed share of each interval to keep BPF run-time stats on (1%..100%) in place of --stats.budget; below 100% runs and run time are scaled from that share and marked as estimates, and every program on the host runs without the stats' cost the rest of the time; 100% keeps them on all the time"},
			&cli.StringFlag{Name: "sweep", Value: "auto", Usage: "how programs are read each tick: auto (iter, else fd), iter (one BPF iterator read; needs Linux 5.19 and BTF), fd (open, describe, close each program)"},
			&cli.StringFlag{Name: "retention.raw", Value: "7d", Usage: "how long raw samples are kept"},
			&cli.StringFlag{Name: "retention.minute", Value: "35d", Usage: "how long minute rollups are kept"},
			&cli.StringFlag{Name: "retention.rollup", Value: "400d", Usage: "how long hour rollups, events and unloaded programs are kept"},
			&cli.DurationFlag{Name: "profile.every", Value: daemon.DefaultProfileEvery, Usage: "start a continuous CPU profile window this often (0 turns continuous profiling off)"},
			&cli.DurationFlag{Name: "profile.duration", Usage: "length of each continuous window, at most --profile.every (default: --profile.every)"},
			&cli.StringFlag{Name: "profile.event", Value: "cpu-clock", Usage: "what CPU profiles sample on: cpu-clock, or cycles, instructions, llc-misses (need a hardware PMU; fall back to cpu-clock)"},
			&cli.BoolFlag{Name: "profile.filter", Value: daemon.DefaultProfileFilter, Usage: "drop CPU samples outside BPF code and hooks in the kernel (a perf_event program on each sampling event; issue 46); --profile.filter=false sends every sample to the daemon"},
			&cli.IntFlag{Name: "profile.hz", Value: daemon.DefaultProfileHz, Usage: "CPU samples per second on each CPU (1 to 1000)"},
			&cli.DurationFlag{Name: "profile.limit", Value: daemon.DefaultProfileLimit, Usage: "longest on-demand capture (bpfperf profile capture)"},
			&cli.StringFlag{Name: "retention.profiles", Value: "7d", Usage: "how long CPU profiles are kept"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.BoolFlag{Name: "compact", Usage: "compact the store file offline (bpfperfd must not be running) and exit"},
			&cli.StringSliceFlag{Name: "counters.programs", Usage: "names or globs of programs whose perf counters are counted when they appear (repeat the flag for more)"},
			&cli.DurationFlag{Name: "counters.window", Value: daemon.DefaultCountersWindow, Usage: "how long each perf counter window counts a target (100ms to 1h)"},
			&cli.DurationFlag{Name: "counters.every", Usage: "how often a target's counter window starts (default 1m, at least --counters.window)"},
			&cli.IntFlag{Name: "counters.max", Value: daemon.DefaultCountersMax, Usage: "programs counted at once (1 to 64); each adds cost to every run"},
			&cli.StringSliceFlag{Name: "latency.programs", Usage: "names or globs of programs whose every run is timed in latency windows on a schedule (repeat the flag for more)"},
			&cli.DurationFlag{Name: "latency.window", Value: daemon.DefaultLatencyWindow, Usage: "how long each scheduled latency window times a target (100ms to 10m)"},
			&cli.DurationFlag{Name: "latency.every", Usage: "how often a target's latency window starts (default 10m, at least --latency.window)"},
			&cli.IntFlag{Name: "latency.max", Value: daemon.DefaultLatencyMax, Usage: "latency windows open at once, on demand and scheduled (1 to 16); each adds cost to every run of its target"},
			&cli.StringFlag{Name: "latency.event", Value: daemon.DefaultLatencyEvent, Usage: "perf event counted per run beside the time in latency windows: cycles, instructions, llc-misses (these need a PMU), cpu-clock, or none"},
			&cli.StringFlag{Name: "web.listen-address", Usage: "serve /metrics, /debug/pprof/profile and the read-only /v1 GETs over TCP on this host:port, e.g. 127.0.0.1:9476 (off when empty)"},
			&cli.StringFlag{Name: "web.config.file", Usage: "exporter-toolkit web config for TLS and basic auth on --web.listen-address"},
			&cli.IntFlag{Name: "web.max-programs", Value: daemon.DefaultWebMaxPrograms, Usage: "programs with series of their own in /metrics; the rest are summed into id=\"other\""},
			&cli.IntFlag{Name: "web.max-requests", Value: daemon.DefaultWebMaxRequests, Usage: "requests answered at once over TCP; more get 503"},
			&cli.StringFlag{Name: "cri.socket", EnvVars: []string{"BPFPERF_CRI_SOCKET"}, Usage: "container runtime's CRI socket, read to name containers by their Kubernetes namespace, pod, container and workload (default: the first of /run/containerd/containerd.sock and /run/crio/crio.sock that exists; \"none\": containers by pod uid and container id)"},
			&cli.StringFlag{Name: "bpffs", Value: "/sys/fs/bpf", Usage: "bpffs mount where pinned programs and maps are looked for; what no process holds is charged to its pin path"},
			&cli.DurationFlag{Name: "maps.every", Value: daemon.DefaultMapsEvery, Usage: "read every BPF map's memory and entries this often (100ms to 1h); bounds what watching maps costs"},
			&cli.DurationFlag{Name: "maps.leak-window", Value: daemon.DefaultMapsLeakWindow, Usage: "a map whose entries grew at every reading for this long raises a leak event"},
			&cli.IntFlag{Name: "maps.walk-budget", Usage: "keys one reading walks at most, over maps the kernel keeps no count of (default 50000)"},
			&cli.DurationFlag{Name: "regressions.window", Value: daemon.DefaultRegressionWindow, Usage: "history each side of a new version must hold before it is compared with the old one (0 turns regression detection off)"},
			&cli.StringFlag{Name: "regressions.min-change", Value: "10%", Usage: "least change of median ns/run reported as a regression or improvement"},
			&cli.DurationFlag{Name: "regressions.shift-window", Value: regress.DefaultShiftWindow, Usage: "each side of a same-version comparison: a program whose ns/run moved this much later without a reload is a shift (0 turns shift detection off)"},
			&cli.Float64Flag{Name: "regressions.alpha", Value: daemon.DefaultRegressionAlpha, Usage: "significance level of the Mann-Whitney U test"},
			&cli.DurationFlag{Name: "debug.panic-after", Hidden: true},
			&cli.BoolFlag{Name: "debug.sweep-fail-load", Hidden: true},
			&cli.IntFlag{Name: "debug.links-fail-reads", Hidden: true, Usage: "the first N readings of BPF links fail, as one made while a link is set up"},
			&cli.StringFlag{Name: "debug.cpus-online-file", Hidden: true, Usage: "the list of online CPUs watched for hotplug (tests change a file of their own)"},
			&cli.StringFlag{Name: "debug.cpuprofile", Hidden: true, Usage: "write a Go CPU profile of bpfperfd itself to this file"},
			&cli.StringFlag{Name: "debug.memprofile", Hidden: true, Usage: "on exit, write a Go heap profile of bpfperfd itself (what is live then) to this file"},
		},
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    func(_ *cli.Context, err error, _ bool) error { return err },
		Action:          run,
	}
}

func run(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", c.Args().First())
	}
	if c.Bool("compact") {
		return compact(c.String("state-dir"))
	}
	cfg, err := daemonConfig(c)
	if err != nil {
		return err
	}
	return runDaemon(cfg, c.String("debug.cpuprofile"), c.String("debug.memprofile"))
}

// compact is --compact: the store file compacted offline, instead of
// running.
func compact(stateDir string) error {
	path := filepath.Join(stateDir, daemon.StoreFile)
	before, after, err := store.Compact(path)
	if err != nil {
		return err
	}
	fmt.Printf("compacted %s: %d -> %d bytes\n", path, before, after)
	return nil
}

// daemonConfig builds the daemon's Config from the flags. It checks the
// flags it parses and the profile and counters settings; daemon.Run checks
// the rest (--interval, say).
func daemonConfig(c *cli.Context) (daemon.Config, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return daemon.Config{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level"))
	}
	var keep store.Retention
	for name, dst := range map[string]*time.Duration{"retention.raw": &keep.Raw, "retention.minute": &keep.Minute, "retention.rollup": &keep.Rollup} {
		d, err := retentionFlag(c, name)
		if err != nil {
			return daemon.Config{}, err
		}
		*dst = d
	}
	profiles, err := retentionFlag(c, "retention.profiles")
	if err != nil {
		return daemon.Config{}, err
	}
	prof := daemon.ProfileConfig{Every: c.Duration("profile.every"), Duration: c.Duration("profile.duration"), Hz: c.Int("profile.hz"), Limit: c.Duration("profile.limit"), Retention: profiles, Event: c.String("profile.event"), Filter: c.Bool("profile.filter")}
	if err := prof.Validate(); err != nil {
		return daemon.Config{}, err
	}
	counters := daemon.CountersConfig{Programs: c.StringSlice("counters.programs"), Window: c.Duration("counters.window"), Every: c.Duration("counters.every"), Max: c.Int("counters.max")}
	if err := counters.Validate(); err != nil {
		return daemon.Config{}, err
	}
	lat := daemon.LatencyConfig{Programs: c.StringSlice("latency.programs"), Window: c.Duration("latency.window"), Every: c.Duration("latency.every"), Max: c.Int("latency.max"), Event: c.String("latency.event")}
	if err := lat.Validate(); err != nil {
		return daemon.Config{}, err
	}
	minChange, err := api.ParsePercent(c.String("regressions.min-change"))
	if err != nil {
		return daemon.Config{}, fmt.Errorf("--regressions.min-change: %w", err)
	}
	var duty int
	if v := c.String("stats.duty"); v != "" {
		if c.IsSet("stats.budget") {
			return daemon.Config{}, fmt.Errorf("%w: --stats.duty and --stats.budget: set one (a fixed share, or a budget)", daemon.ErrBadConfig)
		}
		if duty, err = daemon.ParseDuty(v); err != nil {
			return daemon.Config{}, err
		}
	}
	budget, err := daemon.ParseBudget(c.String("stats.budget"))
	if err != nil {
		return daemon.Config{}, err
	}
	regressions := regress.DefaultConfig()
	regressions.Window, regressions.MinChange, regressions.Alpha = c.Duration("regressions.window"), minChange, c.Float64("regressions.alpha")
	regressions.ShiftWindow = c.Duration("regressions.shift-window")
	return daemon.Config{
		StateDir:     c.String("state-dir"),
		Socket:       c.String("socket"),
		SocketGroup:  c.String("socket-group"),
		HostLock:     c.String("host-lock"),
		HostLockWait: c.Duration("host-lock-wait"),
		Interval:     c.Duration("interval"),
		StatsMode:    c.String("stats-mode"),
		StatsDuty:    duty,
		StatsBudget:  budget,
		Sweep:        c.String("sweep"),
		ProcRoot:     "/proc",
		Retention:    keep,
		Profile:      prof,
		Version:      version,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		PanicAfter:   c.Duration("debug.panic-after"),
		Counters:     counters,
		Latency:      lat,
		Regressions:  regressions,
		Web: daemon.WebConfig{
			ListenAddress: c.String("web.listen-address"), ConfigFile: c.String("web.config.file"),
			MaxPrograms: c.Int("web.max-programs"), MaxRequests: c.Int("web.max-requests"),
		},
		SweepFailLoad:  c.Bool("debug.sweep-fail-load"),
		LinksFailReads: c.Int("debug.links-fail-reads"),
		CPUsOnlineFile: c.String("debug.cpus-online-file"),
		BPFFS:          c.String("bpffs"),
		CRISocket:      c.String("cri.socket"),
		MapsEvery:      c.Duration("maps.every"),
		MapsLeakWindow: c.Duration("maps.leak-window"),
		MapsWalkBudget: c.Int("maps.walk-budget"),
	}, nil
}

// retentionFlag reads the --retention.* flag name, which must be a
// positive duration.
func retentionFlag(c *cli.Context, name string) (time.Duration, error) {
	d, err := api.ParseDuration(c.String(name))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--%s %q is not a positive duration like 7d or 36h", name, c.String(name))
	}
	return d, nil
}

// runDaemon runs the daemon until SIGTERM or SIGINT, profiling bpfperfd
// itself where --debug.cpuprofile or --debug.memprofile ask.
func runDaemon(cfg daemon.Config, cpuProfile, memProfile string) error {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--debug.cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--debug.cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go exitIfStopIsSlow(ctx)
	if memProfile != "" {
		// Taken the moment a stop is asked for, while the daemon's state
		// is still live; the process waits for it.
		written := make(chan struct{})
		defer func() {
			stop() // a daemon that ended on its own still writes it
			<-written
		}()
		go func() {
			defer close(written)
			<-ctx.Done()
			if f, err := os.Create(memProfile); err == nil {
				runtime.GC()
				pprof.WriteHeapProfile(f)
				f.Close()
			}
		}()
	}
	err := daemon.Run(ctx, cfg)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped during start-up (the store's proof, say): a stop asked
		// for, not a failure.
		return nil
	}
	return err
}
