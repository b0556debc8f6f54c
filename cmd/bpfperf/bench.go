package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// benchCommand runs BPF micro-benchmarks locally through BPF_PROG_TEST_RUN.
// It needs root, not the daemon; only --store (hand the report to the
// daemon, to join the history), runs, and compare or plot of a stored run
// talk to it.
func benchCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "run BPF micro-benchmarks (built-in suite, an object, or a YAML suite) with BPF_PROG_TEST_RUN",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table, json, csv, bmf (Bencher) or gobench (benchstat)"},
			&cli.StringFlag{Name: "save", Usage: "also write the full report as JSON to `FILE` (for compare and plot)"},
			&cli.IntFlag{Name: "repeat", Usage: "runs per measurement (default: calibrated per test to --target)"},
			&cli.DurationFlag{Name: "target", Value: bench.DefaultConfig().Target, Usage: "time one measurement aims for when --repeat is not set"},
			&cli.IntFlag{Name: "measures", Value: bench.DefaultConfig().Measures, Usage: "measurements per test (each is one mean from the kernel)"},
			&cli.BoolFlag{Name: "no-warmup", Usage: "skip the discarded warm-up measurement"},
			&cli.StringFlag{Name: "cpu", Usage: "pin to `CPU`; a list (0,1 or 0-3) runs every test on all of them at once"},
			&cli.BoolFlag{Name: "parallel", Usage: "run every test on all CPUs at once (per-CPU parallel mode)"},
			&cli.StringFlag{Name: "filter", Usage: "run only tests whose name matches `REGEX`"},
			&cli.BoolFlag{Name: "with-stats", Usage: "turn bpf_stats on during the run (adds ~45 ns per run)"},
			&cli.BoolFlag{Name: "counters", Usage: "count --counters.events per run around each test run, in kernel mode (default: on where a PMU exists; --counters=false turns it off)"},
			&cli.StringFlag{Name: "counters.events", Value: "cycles,instructions,llc-misses", Usage: "the events --counters counts, comma separated: cycles, instructions, llc-misses (need a PMU), cpu-clock"},
			&cli.BoolFlag{Name: "quick", Usage: "a trimmed suite with shorter measurements, for CI"},
			&cli.StringFlag{Name: "object", Usage: "benchmark a program in this BPF ELF `FILE` instead of the built-in suite"},
			&cli.StringFlag{Name: "program", Usage: "with --object: the program to run"},
			&cli.StringFlag{Name: "data", Usage: "with --object: packet data `FILE` (default: a 64-byte UDP frame)"},
			&cli.StringFlag{Name: "ctx", Usage: "with --object: context (ctx_in) `FILE`"},
			&cli.StringFlag{Name: "map-init", Usage: "with --object: YAML `FILE` of map entries to insert first"},
			&cli.StringFlag{Name: "suite", Usage: "run the tests of this YAML suite `FILE`"},
			&cli.BoolFlag{Name: "store", Usage: "after the run, hand the report to bpfperfd, which keeps it with the history (see bench runs)"},
			&cli.StringFlag{Name: "label", Usage: "with --store: name the run in listings (default: what ran, e.g. \"quick filter=...\")"},
			&cli.StringFlag{Name: "profile", Usage: "write a CPU profile (gzipped pprof) of each test's measurements to `DIR`/<test>.pb.gz, for bpfperf profile diff; made if absent"},
		},
		Action:      func(c *cli.Context) error { return benchRun(c, dial) },
		Subcommands: []*cli.Command{benchCompareCommand(dial), benchPlotCommand(dial), benchListCommand(), benchRunsCommand(dial), benchGetCommand(dial), benchHooksCommand()},
	}
}

func benchConfig(c *cli.Context) (bench.Config, error) {
	cfg := bench.DefaultConfig()
	if c.IsSet("repeat") {
		if c.Int("repeat") <= 0 {
			return cfg, fmt.Errorf("--repeat must be at least 1, got %d", c.Int("repeat"))
		}
		cfg.Repeat = c.Int("repeat")
	}
	if c.Int("measures") <= 0 {
		return cfg, fmt.Errorf("--measures must be at least 1, got %d", c.Int("measures"))
	}
	cfg.Measures = c.Int("measures")
	cfg.Target = c.Duration("target")
	cfg.Warmup = !c.Bool("no-warmup")
	cfg.Quick = c.Bool("quick")
	if cfg.Quick && !c.IsSet("target") {
		cfg.Target = bench.QuickTarget
	}
	if s := c.String("filter"); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			return cfg, fmt.Errorf("--filter: %w", err)
		}
		cfg.Filter = re
	}
	if s := c.String("cpu"); s != "" {
		cpus, err := parseCPUs(s)
		if err != nil {
			return cfg, fmt.Errorf("--cpu: %w", err)
		}
		cfg.CPUs = cpus
	}
	if c.Bool("parallel") {
		if c.IsSet("cpu") {
			return cfg, fmt.Errorf("--parallel and --cpu: pick one (--cpu 0,1 runs in parallel on those CPUs)")
		}
		for i := 0; i < runtime.NumCPU(); i++ {
			cfg.CPUs = append(cfg.CPUs, i)
		}
	}
	for _, f := range []string{"program", "data", "ctx", "map-init"} {
		if c.IsSet(f) && !c.IsSet("object") {
			return cfg, fmt.Errorf("--%s needs --object", f)
		}
	}
	if c.IsSet("object") && c.IsSet("suite") {
		return cfg, fmt.Errorf("--object and --suite: pick one")
	}
	events, unsupported, err := counterEvents(c)
	if err != nil {
		return cfg, err
	}
	cfg.Events, cfg.Unsupported = events, unsupported
	for _, e := range slices.Sorted(maps.Keys(unsupported)) {
		var oe *perfevent.OpenError
		if errors.As(unsupported[e], &oe) {
			fmt.Fprintf(c.App.ErrWriter, "bench: %v not counted: %s\n", e, oe.Summary())
		}
	}
	return cfg, cfg.Validate()
}

// counterEvents are the events bench counts per run: --counters.events
// where they open here. Asked for (--counters, or --counters.events set),
// events that do not open are an error saying why; by default they are
// quietly left out, so hosts without a PMU run bench as before. An event
// the PMU does not count (llc-misses on QEMU's arm64 PMU) is left out
// either way and returned with why, for the report to name.
func counterEvents(c *cli.Context) ([]perfevent.Event, map[perfevent.Event]error, error) {
	if c.IsSet("counters") && !c.Bool("counters") {
		return nil, nil, nil
	}
	var events []perfevent.Event
	for name := range strings.SplitSeq(c.String("counters.events"), ",") {
		e, err := perfevent.Parse(strings.TrimSpace(name))
		if err != nil {
			return nil, nil, fmt.Errorf("--counters.events: %w", err)
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	counted, unsupported, err := bench.ProbeEvents(events)
	if err != nil {
		if c.IsSet("counters") || c.IsSet("counters.events") {
			return nil, nil, fmt.Errorf("--counters: %w", err)
		}
		return nil, nil, nil
	}
	return counted, unsupported, nil
}

// parseCPUs reads "3", "0,2" or "0-3".
func parseCPUs(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("%q is not a CPU number", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a CPU range", part)
			}
		}
		for i := a; i <= b; i++ {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

func benchTests(c *cli.Context) ([]bench.Test, error) {
	switch {
	case c.IsSet("object"):
		if c.String("program") == "" {
			return nil, fmt.Errorf("--object needs --program NAME")
		}
		t, err := bench.ObjectTest(bench.Object{
			Path: c.String("object"), Program: c.String("program"),
			Data: c.String("data"), Ctx: c.String("ctx"), MapInit: c.String("map-init"),
		})
		if err != nil {
			return nil, err
		}
		return []bench.Test{t}, nil
	case c.IsSet("suite"):
		return bench.LoadSuiteFile(c.String("suite"))
	}
	return bench.Suite(), nil
}

func benchRun(c *cli.Context, dial clientFactory) error {
	if c.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q (subcommands: compare, plot, list, runs)", c.Args().First())
	}
	if c.IsSet("label") && !c.Bool("store") {
		return fmt.Errorf("--label needs --store")
	}
	format := c.String("output")
	if err := bench.Write(io.Discard, &bench.Report{}, format); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	cfg, err := benchConfig(c)
	if err != nil {
		return err
	}
	tests, err := benchTests(c)
	if err != nil {
		return err
	}
	tests = bench.Select(tests, cfg)
	if len(tests) == 0 {
		return fmt.Errorf("no test matches --filter %q", c.String("filter"))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("bench needs root (BPF_PROG_TEST_RUN and loading programs)")
	}
	opts := bench.Options{WithStats: c.Bool("with-stats"), Env: bench.Env{Version: version, Commit: commit}}
	var profiles *bench.ProfileDir
	if c.IsSet("profile") {
		// A bad directory fails here, before anything runs.
		if profiles, err = bench.OpenProfileDir(c.String("profile"), cfg.CPUs); err != nil {
			return fmt.Errorf("--profile %q: %w", c.String("profile"), err)
		}
		defer profiles.Close()
		opts.Measuring = profiles.Measuring
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	clearProgress := func() {}
	if isTerminal(os.Stderr) {
		// Progress on a terminal only; logs and pipes get the result alone.
		done := 0
		opts.Progress = func(r bench.Result) {
			done++
			fmt.Fprintf(os.Stderr, "\r%d/%d %-60.60s", done, len(tests), r.Name)
		}
		clearProgress = func() { fmt.Fprintf(os.Stderr, "\r%80s\r", "") }
	}
	rep, err := bench.Run(ctx, tests, cfg, opts)
	clearProgress()
	if err != nil {
		return err
	}
	if p := c.String("save"); p != "" {
		if err := writeFile(p, func(w io.Writer) error { return bench.WriteJSON(w, rep) }); err != nil {
			return err
		}
	}
	if err := bench.Write(c.App.Writer, rep, format); err != nil {
		return err
	}
	var profileErr error
	if profiles != nil {
		profileErr = printProfiles(c.App.ErrWriter, profiles)
	}
	if c.Bool("store") {
		if err := storeReport(c, dial, rep); err != nil {
			return err
		}
	}
	if profileErr != nil {
		return profileErr
	}
	if rep.Failed() {
		return fmt.Errorf("bench: some tests failed (see FAILED above)")
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// storeReport hands rep to the daemon. The results are already printed (and
// saved), so a missing daemon loses nothing but the stored copy.
func storeReport(c *cli.Context, dial clientFactory, rep *bench.Report) error {
	var buf bytes.Buffer
	if err := bench.WriteJSON(&buf, rep); err != nil {
		return err
	}
	client, err := dial(c)
	if err == nil {
		var run api.BenchRun
		if run, err = client.StoreBenchRun(buf.Bytes(), c.String("label")); err == nil {
			fmt.Fprintf(c.App.ErrWriter, "stored as bench run %d (bpfperf bench runs)\n", run.ID)
			return nil
		}
	}
	if p := c.String("save"); p != "" {
		return fmt.Errorf("--store: %v; the report is saved in %s only", err, p)
	}
	return fmt.Errorf("--store: %w; the results above were not stored", err)
}

// printProfiles says where each test's profile went, on stderr after the
// table (stdout stays the report alone, valid JSON with -o json), and
// which could not be written.
func printProfiles(w io.Writer, profiles *bench.ProfileDir) error {
	for _, f := range profiles.Files() {
		fmt.Fprintf(w, "profile of %s: %s (%d samples over %v)\n", f.Test, f.Path, f.Samples, f.Span.Round(time.Millisecond))
	}
	err := profiles.Err()
	if err == nil {
		return nil
	}
	fmt.Fprintln(w, err)
	return fmt.Errorf("--profile: some profiles could not be written (see above)")
}
