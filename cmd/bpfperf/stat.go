package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	pprof "github.com/google/pprof/profile"
	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/bench/stat"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/profile"
)

// Bounds of stat's flags.
const (
	statMinInterval = 10 * time.Millisecond
	statMaxInterval = time.Hour
	statMinWindow   = 100 * time.Millisecond
	statMaxWindow   = 24 * time.Hour
	statMaxRepeat   = 1000
)

func statCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "stat",
		Usage:     "run a command and report what each BPF program cost while it ran (a macro-benchmark)",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: "Reads every program's run-time stats just before CMD starts, every --interval while it runs,\n" +
			"and just after it ends, and reports the deltas over exactly that span for every program that ran\n" +
			"(or those named by --prog). Programs CMD loads count from zero; a program unloaded during CMD\n" +
			"counts up to its last reading. --duration measures a window of the live system instead.\n" +
			"As root it reads the kernel itself, turning run-time stats on with a stats fd for its own lifetime;\n" +
			"otherwise it asks bpfperfd (readings at the daemon's interval). CMD's exit status is passed through.\n\n" +
			"One row per program, by its full name (bpftool's, not the kernel's 15 characters); programs sharing\n" +
			"a type and name get a row each, NAME, NAME#2, ... in load order, each lined up with itself across --repeat runs.\n\n" +
			"Output: the table (the default) goes to stderr and CMD's output stays where it was, as with perf stat.\n" +
			"With -o json, csv, bmf or gobench, stdout carries the report alone and CMD's stdout goes to stderr,\n" +
			"so `bpfperf stat -o json -- CMD | jq .` works whatever CMD prints.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "prog", Aliases: []string{"p"}, Usage: "report this program (id, full or kernel name) even if it did not run, and only the named ones; repeatable"},
			&cli.StringFlag{Name: "filter", Usage: "report only programs whose full or kernel name matches `REGEX`"},
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between readings while CMD runs (bounds what a program unloaded during CMD can miss)"},
			&cli.DurationFlag{Name: "duration", Usage: "measure this window of the live system instead of a command"},
			&cli.IntFlag{Name: "repeat", Aliases: []string{"r"}, Value: 1, Usage: "run CMD `N` times; figures are medians ± IQR over the runs"},
			&cli.StringFlag{Name: "source", Value: "auto", Usage: "where readings come from: kernel (needs root), bpfperfd, or auto (kernel as root)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table, json, csv, bmf (Bencher) or gobench (benchstat); all but table send CMD's stdout to stderr"},
			&cli.StringFlag{Name: "save", Usage: "also write the full report as JSON to `FILE` (bench compare reads it)"},
			&cli.BoolFlag{Name: "profile", Usage: "also sample every CPU on cpu-clock while CMD runs: each program's sampled CPU share, tail-call targets counted for themselves (needs root)"},
			&cli.StringFlag{Name: "profile-out", Usage: "with --profile: write the profile of all runs (gzipped pprof) to `FILE`"},
		},
		Action: func(c *cli.Context) error { return statRun(c, dial) },
	}
}

// statOptions are stat's flags, checked.
type statOptions struct {
	argv     []string
	window   time.Duration
	interval time.Duration
	repeat   int
	source   string
	format   string
	named    []string
	filter   *regexp.Regexp
	// profile samples CPUs while CMD runs; profileOut is where the
	// profile goes.
	profile    bool
	profileOut string
}

func statFlags(c *cli.Context) (statOptions, error) {
	o := statOptions{argv: c.Args().Slice(), window: c.Duration("duration"), interval: c.Duration("interval"),
		repeat: c.Int("repeat"), source: c.String("source"), format: c.String("output"), named: c.StringSlice("prog")}
	switch {
	case len(o.argv) > 0 && c.IsSet("duration"):
		return o, errors.New("stat: a command or --duration, not both")
	case len(o.argv) == 0 && !c.IsSet("duration"):
		return o, errors.New("stat: no command to run (bpfperf stat [flags] -- CMD [ARGS...], or --duration D)")
	case c.IsSet("duration") && (o.window < statMinWindow || o.window > statMaxWindow):
		return o, fmt.Errorf("--duration %v: must be within %v and %v", o.window, statMinWindow, statMaxWindow)
	case o.interval < statMinInterval || o.interval > statMaxInterval:
		return o, fmt.Errorf("--interval %v: must be within %v and %v", o.interval, statMinInterval, statMaxInterval)
	case o.repeat < 1 || o.repeat > statMaxRepeat:
		return o, fmt.Errorf("--repeat %d: must be within 1 and %d", o.repeat, statMaxRepeat)
	case !slices.Contains([]string{"auto", "kernel", "bpfperfd"}, o.source):
		return o, fmt.Errorf("--source %q: want kernel, bpfperfd or auto", o.source)
	case c.IsSet("profile-out") && !c.Bool("profile"):
		return o, errors.New("--profile-out needs --profile")
	case c.Bool("profile") && os.Geteuid() != 0:
		return o, errors.New("--profile needs root (sampling every CPU's kernel stacks)")
	}
	o.profile, o.profileOut = c.Bool("profile"), c.String("profile-out")
	if err := bench.Write(io.Discard, &bench.Report{}, o.format); err != nil {
		return o, fmt.Errorf("-o: %w", err)
	}
	if s := c.String("filter"); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			return o, fmt.Errorf("--filter: %w", err)
		}
		o.filter = re
	}
	if o.source == "auto" {
		o.source = "bpfperfd"
		if os.Geteuid() == 0 {
			o.source = "kernel"
		}
	}
	return o, nil
}

func statRun(c *cli.Context, dial clientFactory) error {
	o, err := statFlags(c)
	if err != nil {
		return err
	}
	read, release, interval, err := statReader(c, dial, o)
	if err != nil {
		return err
	}
	defer release()
	cfg, seen := statConfig(o, read, interval)
	prof, err := statProfiler(o)
	if err != nil {
		return err
	}
	if prof != nil {
		defer prof.Close()
	}
	runs, err := statMeasure(c.Context, cfg, statTarget(o), prof, o.repeat)
	if err != nil {
		return err
	}
	// Nothing more to read: stats stop costing every program now, not
	// once the report is out.
	release()
	for _, n := range o.named {
		if !seen[n] {
			return fmt.Errorf("--prog %s: no such program was loaded while stat measured", n)
		}
	}
	rep := statReport(o, interval, runs)
	if o.profileOut != "" {
		if err := writeMergedProfile(o.profileOut, runs.profiles); err != nil {
			return err
		}
	}
	if err := statWrite(c, o, rep); err != nil {
		return err
	}
	if runs.exit > 0 {
		return exitError{runs.exit, ""}
	}
	return nil
}

// statConfig selects the programs of --prog and --filter. seen collects
// the --prog values some reading matched: one that none did named no
// program, which statRun reports once the runs are over.
func statConfig(o statOptions, read stat.Reader, interval time.Duration) (cfg stat.Config, seen map[string]bool) {
	cfg = stat.Config{Read: read, Interval: interval}
	seen = map[string]bool{}
	if len(o.named) > 0 {
		cfg.Named = func(r stat.Reading) bool {
			for _, n := range o.named {
				if n == r.Name || (r.KernelName != "" && n == r.KernelName) || n == strconv.FormatUint(uint64(r.ID), 10) {
					seen[n] = true
					return true
				}
			}
			return false
		}
	}
	if o.filter != nil {
		cfg.Match = func(r stat.Reading) bool {
			return o.filter.MatchString(r.Name) || (r.KernelName != "" && o.filter.MatchString(r.KernelName))
		}
	}
	return cfg, seen
}

// statTarget is what each run measures: CMD, or a window of --duration.
func statTarget(o statOptions) stat.Run {
	if len(o.argv) == 0 {
		return stat.Window(o.window)
	}
	// A machine format owns stdout: CMD's stdout goes to stderr, so
	// that the report parses whatever CMD prints.
	cmdOut := os.Stdout
	if o.format != "table" {
		cmdOut = os.Stderr
	}
	return stat.Command(o.argv, os.Stdin, cmdOut, os.Stderr)
}

// statProfiler opens the CPU sampler of --profile, or returns nil without
// it. The caller closes it.
func statProfiler(o statOptions) (*stat.Profiler, error) {
	if !o.profile {
		return nil, nil
	}
	prof, err := stat.NewProfiler()
	if err != nil {
		return nil, err
	}
	if o.profileOut != "" {
		// Refuse an unwritable path before the command runs, not after.
		if err := writeFile(o.profileOut, func(io.Writer) error { return nil }); err != nil {
			prof.Close()
			return nil, fmt.Errorf("--profile-out: %w", err)
		}
	}
	return prof, nil
}

// statRuns is what the --repeat runs measured.
type statRuns struct {
	ms []stat.Measurement
	// profiles and sampled (each program's sampled CPU share) are one per
	// run with --profile, else empty.
	profiles []*pprof.Profile
	sampled  []map[uint32]float64
	// exit is the status of the run that failed, 0 if none did.
	exit int
}

// statMeasure measures run up to repeat times, under prof when it is not
// nil.
func statMeasure(ctx context.Context, cfg stat.Config, run stat.Run, prof *stat.Profiler, repeat int) (statRuns, error) {
	var runs statRuns
	for range repeat {
		measured := run
		var profiled func() (*pprof.Profile, error)
		if prof != nil {
			measured, profiled = prof.Wrap(run)
		}
		m, err := stat.Measure(ctx, cfg, measured)
		if err != nil {
			return runs, err
		}
		if profiled != nil {
			p, err := profiled()
			if err != nil {
				return runs, err
			}
			shares, err := profile.ProgramShares(p)
			if err != nil {
				return runs, err
			}
			runs.profiles, runs.sampled = append(runs.profiles, p), append(runs.sampled, shares)
		}
		runs.ms = append(runs.ms, m)
		if m.ExitCode > 0 {
			// A failed run ends the series: its figures are reported, and
			// its status passed on.
			runs.exit = m.ExitCode
			break
		}
	}
	return runs, nil
}

// statReport is the report of the runs, with what ran them and how.
func statReport(o statOptions, interval time.Duration, runs statRuns) *bench.Report {
	macro := bench.MacroRun{Command: o.argv, IntervalMS: float64(interval) / 1e6, Source: o.source}
	if len(o.argv) == 0 {
		macro.WindowSeconds = o.window.Seconds()
	}
	rep := stat.Report(runs.ms, macro, runs.sampled)
	rep.Fingerprint = bench.Env{Version: version, Commit: commit}.Fingerprint()
	rep.Fingerprint.Stats = bench.StatsMode{Counting: true, Source: statsSource(o.source)}
	rep.Config = bench.ReportConfig{Repeat: o.repeat, Measures: len(runs.ms), WithStats: true}
	if o.filter != nil {
		rep.Config.Filter = o.filter.String()
	}
	return rep
}

// statWrite saves the report to --save and writes it in -o's format.
func statWrite(c *cli.Context, o statOptions, rep *bench.Report) error {
	if p := c.String("save"); p != "" {
		if err := writeFile(p, func(w io.Writer) error { return bench.WriteJSON(w, rep) }); err != nil {
			return err
		}
	}
	// A table goes to stderr after the command's output (as perf stat
	// does), a machine format to stdout, which it has to itself.
	out := c.App.Writer
	if o.format == "table" && len(o.argv) > 0 {
		out = c.App.ErrWriter
	}
	return bench.Write(out, rep, o.format)
}

func statsSource(source string) string {
	if source == "kernel" {
		return "BPF_ENABLE_STATS fd held by bpfperf stat"
	}
	return "bpfperfd"
}

// statReader returns the reader of --source, with what to release after,
// and the interval readings really come at.
func statReader(c *cli.Context, dial clientFactory, o statOptions) (stat.Reader, func(), time.Duration, error) {
	if o.source == "kernel" {
		if os.Geteuid() != 0 {
			return nil, nil, 0, errors.New("stat --source kernel needs root (reading every program's stats); without it, stat asks bpfperfd")
		}
		// A stats fd of our own: the kernel counts while any holder has
		// one, and drops ours when we exit, however we exit. Nothing
		// persistent (the sysctl) is touched.
		stats, err := collectors.EnableStats(collectors.StatsConfig{Mode: "fd"})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("turn BPF run-time stats on: %w", err)
		}
		return stat.KernelReader(), func() { stats.Restore() }, o.interval, nil
	}
	client, err := dial(c)
	if err != nil {
		return nil, nil, 0, err
	}
	st, err := client.Status()
	if err != nil {
		return nil, nil, 0, err
	}
	interval := o.interval
	if d := time.Duration(st.IntervalMs) * time.Millisecond; c.IsSet("interval") && interval < d {
		return nil, nil, 0, fmt.Errorf("--interval %v: bpfperfd reads every %v, stat cannot read more often through it (run as root to read the kernel)", interval, d)
	} else if !c.IsSet("interval") {
		interval = d
	}
	return daemonReader(client, interval), func() {}, interval, nil
}

// daemonReader reads the daemon's counters, each time from a tick taken
// after the call, so that the reading before the command and the one
// after it bound it as a kernel reading would (to within one tick's
// sweep). Each program's type and name is learned once from its listing.
func daemonReader(client *api.Client, interval time.Duration) stat.Reader {
	known := map[uint32]api.ProgRow{}
	return func() ([]stat.Reading, error) {
		cs, err := freshCounters(client, time.Now(), interval)
		if err != nil {
			return nil, err
		}
		for _, pc := range cs {
			if _, ok := known[pc.ID]; !ok {
				rows, err := client.Progs(false)
				if err != nil {
					return nil, err
				}
				for _, r := range rows {
					known[r.ID] = r
				}
				break
			}
		}
		out := make([]stat.Reading, 0, len(cs))
		for _, pc := range cs {
			row := known[pc.ID]
			if row.Own {
				continue // bpfperfd's own sweep iterator
			}
			out = append(out, stat.Reading{ID: pc.ID, Type: row.Type, Name: row.Name, KernelName: row.KernelName, Tag: pc.Tag,
				Counters: stat.Counters{RunCnt: pc.RunCnt, RunTimeNs: pc.RunTimeNs, RecursionMisses: pc.RecursionMisses}})
		}
		return out, nil
	}
}

// freshCounters polls the daemon until its counters come from a tick
// after since. A daemon that does not tick within three intervals is
// stuck, and said to be.
func freshCounters(client *api.Client, since time.Time, interval time.Duration) ([]api.ProgCounters, error) {
	deadline := since.Add(3*interval + time.Second)
	for {
		cs, err := client.ProgCounters()
		if err != nil {
			return nil, err
		}
		newest := int64(0)
		for _, pc := range cs {
			newest = max(newest, pc.LastSampleMs)
		}
		if newest > since.UnixMilli() {
			return cs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bpfperfd took no reading in %v (its interval is %v)", time.Since(since).Round(time.Millisecond), interval)
		}
		time.Sleep(min(interval/10, 50*time.Millisecond))
	}
}

// writeMergedProfile writes the runs' profiles, merged, to path.
func writeMergedProfile(path string, ps []*pprof.Profile) error {
	merged, err := profile.Merge(ps...)
	if err != nil {
		return err
	}
	b, err := profile.Marshal(merged)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
