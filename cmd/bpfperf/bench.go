package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/store"
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
			&cli.BoolFlag{Name: "quick", Usage: "a trimmed suite with shorter measurements, for CI"},
			&cli.StringFlag{Name: "object", Usage: "benchmark a program in this BPF ELF `FILE` instead of the built-in suite"},
			&cli.StringFlag{Name: "program", Usage: "with --object: the program to run"},
			&cli.StringFlag{Name: "data", Usage: "with --object: packet data `FILE` (default: a 64-byte UDP frame)"},
			&cli.StringFlag{Name: "ctx", Usage: "with --object: context (ctx_in) `FILE`"},
			&cli.StringFlag{Name: "map-init", Usage: "with --object: YAML `FILE` of map entries to insert first"},
			&cli.StringFlag{Name: "suite", Usage: "run the tests of this YAML suite `FILE`"},
			&cli.BoolFlag{Name: "store", Usage: "after the run, hand the report to bpfperfd, which keeps it with the history (see bench runs)"},
			&cli.StringFlag{Name: "label", Usage: "with --store: name the run in listings (default: what ran, e.g. \"quick filter=...\")"},
		},
		Action:      func(c *cli.Context) error { return benchRun(c, dial) },
		Subcommands: []*cli.Command{benchCompareCommand(dial), benchPlotCommand(dial), benchListCommand(), benchRunsCommand(dial), benchGetCommand(dial)},
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
			return cfg, fmt.Errorf("--filter: %v", err)
		}
		cfg.Filter = re
	}
	if s := c.String("cpu"); s != "" {
		cpus, err := parseCPUs(s)
		if err != nil {
			return cfg, fmt.Errorf("--cpu: %v", err)
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
	return cfg, cfg.Validate()
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
		return fmt.Errorf("-o: %v", err)
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
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	var progress func(bench.Result)
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err == nil {
		// Progress on a terminal only; logs and pipes get the result alone.
		done := 0
		progress = func(r bench.Result) {
			done++
			fmt.Fprintf(os.Stderr, "\r%d/%d %-60.60s", done, len(tests), r.Name)
		}
		defer fmt.Fprintf(os.Stderr, "\r%80s\r", "")
	}
	rep, err := bench.Run(ctx, tests, cfg, bench.Options{
		WithStats: c.Bool("with-stats"),
		Env:       bench.Env{Version: version, Commit: commit},
		Progress:  progress,
	})
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
	if c.Bool("store") {
		if err := storeReport(c, dial, rep); err != nil {
			return err
		}
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

func benchCompareCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:        "compare",
		Usage:       "compare two runs (JSON reports, Go benchmark files or stored runs): median delta and a Mann-Whitney U test, like benchstat",
		ArgsUsage:   "BASE NEW",
		Description: runRefUsage + ". Example: bpfperf bench compare last~1 last",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"},
			&cli.Float64Flag{Name: "fail-on-regression", Usage: "exit non-zero if a test got significantly slower by more than `PCT` percent"},
			&cli.Float64Flag{Name: "min-delta", Value: bench.DefaultMinDeltaPct, Usage: "changes smaller than `PCT` percent are run-to-run drift, never significant"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("bench compare: takes BASE and NEW, got %d arguments", c.NArg())
			}
			if f := c.String("output"); f != "table" && f != "json" {
				return fmt.Errorf("-o %q: want table or json", f)
			}
			if c.IsSet("fail-on-regression") && c.Float64("fail-on-regression") < 0 {
				return fmt.Errorf("--fail-on-regression must be 0 or more")
			}
			if c.Float64("min-delta") < 0 {
				return fmt.Errorf("--min-delta must be 0 or more")
			}
			runs := &runLoader{c: c, dial: dial}
			base, err := runs.samples(c.Args().Get(0))
			if err != nil {
				return err
			}
			cur, err := runs.samples(c.Args().Get(1))
			if err != nil {
				return err
			}
			cmp := bench.CompareMin(base, cur, c.Float64("min-delta"))
			if len(cmp.Deltas) == 0 {
				return fmt.Errorf("bench compare: no test in common")
			}
			if note := runs.mismatch(); note != "" {
				fmt.Fprintln(c.App.ErrWriter, "note:", note)
			}
			if c.String("output") == "json" {
				err = writeJSON(c.App.Writer, cmp)
			} else {
				err = bench.WriteComparison(c.App.Writer, cmp)
			}
			if err != nil {
				return err
			}
			if c.IsSet("fail-on-regression") {
				pct := c.Float64("fail-on-regression")
				if regs := cmp.Regressions(pct); len(regs) > 0 {
					return fmt.Errorf("%d regression(s) over %.1f%%, worst %s %+.1f%%", len(regs), pct, worst(regs).Test, worst(regs).Pct)
				}
			}
			return nil
		},
	}
}

func worst(ds []bench.Delta) bench.Delta {
	w := ds[0]
	for _, d := range ds {
		if d.Pct > w.Pct {
			w = d
		}
	}
	return w
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func benchPlotCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:        "plot",
		Usage:       "write SVG plots of a run: ns vs tail-call chain length, map access time vs map size per key pattern",
		ArgsUsage:   "REPORT.json|run:ID",
		Description: "REPORT is a JSON report from bench --save, or a stored run: run:ID, or ID, last, last~N when no such file exists.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: ".", Usage: "write tailcalls.svg and maps.svg into `DIR`"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("bench plot: takes one REPORT (a JSON report from bench --save, or a stored run), got %d arguments", c.NArg())
			}
			rep, err := (&runLoader{c: c, dial: dial}).report(c.Args().First())
			if err != nil {
				return err
			}
			files, err := bench.Plot(rep, c.String("dir"))
			for _, p := range files {
				fmt.Fprintln(c.App.Writer, "wrote", p)
			}
			return err
		},
	}
}

func benchListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the built-in tests (and the program types bench can run)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "filter", Usage: "only tests whose name matches `REGEX`"},
			&cli.BoolFlag{Name: "quick", Usage: "only the --quick suite"},
		},
		Action: func(c *cli.Context) error {
			cfg := bench.DefaultConfig()
			cfg.Quick = c.Bool("quick")
			if s := c.String("filter"); s != "" {
				re, err := regexp.Compile(s)
				if err != nil {
					return fmt.Errorf("--filter: %v", err)
				}
				cfg.Filter = re
			}
			return bench.WriteList(c.App.Writer, bench.Select(bench.Suite(), cfg))
		},
	}
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
		var run store.BenchRun
		if run, err = client.StoreBenchRun(buf.Bytes(), c.String("label")); err == nil {
			fmt.Fprintf(c.App.ErrWriter, "stored as bench run %d (bpfperf bench runs)\n", run.ID)
			return nil
		}
	}
	if p := c.String("save"); p != "" {
		return fmt.Errorf("--store: %v; the report is saved in %s only", err, p)
	}
	return fmt.Errorf("--store: %v; the results above were not stored", err)
}

// A run to compare or plot is a file (a JSON report, or a Go benchmark file
// for compare) or a stored run: run:REF, or REF alone when no file has that
// name, where REF is a run id, last (the newest stored run) or last~N (N
// runs before it).
const runRefUsage = "BASE and NEW are files (JSON reports from bench --save, or Go benchmark files) or stored runs: run:ID, or ID, last, last~N when no such file exists"

var runRefPattern = regexp.MustCompile(`^([0-9]+|last(~[0-9]+)?)$`)

// storedRef says whether arg names a stored run, and which.
func storedRef(arg string) (string, bool, error) {
	if ref, ok := strings.CutPrefix(arg, "run:"); ok {
		return ref, true, nil
	}
	_, err := os.Stat(arg)
	switch {
	case err == nil:
		return "", false, nil
	case runRefPattern.MatchString(arg):
		return arg, true, nil
	case errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("%s: no such file, and not a stored run (run:ID, ID, last, last~N)", arg)
	}
	return "", false, err
}

// runLoader reads runs named on the command line, dialing the daemon once
// and only if a stored run is named.
type runLoader struct {
	c      *cli.Context
	dial   clientFactory
	client *daemon.Client
	// fps holds the fingerprint of each run read, nil where the file
	// carries none (Go benchmark format).
	fps []*bench.Fingerprint
}

// mismatch says how the first two runs' machines differ in ways that move
// every number, or "" when they agree (or one is unknown).
func (l *runLoader) mismatch() string {
	if len(l.fps) < 2 || l.fps[0] == nil || l.fps[1] == nil {
		return ""
	}
	a, b := l.fps[0], l.fps[1]
	var diffs []string
	if a.Stats.Counting != b.Stats.Counting {
		diffs = append(diffs, fmt.Sprintf("bpf_stats %s vs %s (about 45 ns per run apart)", a.Stats, b.Stats))
	}
	if a.Kernel != b.Kernel {
		diffs = append(diffs, fmt.Sprintf("kernel %s vs %s", a.Kernel, b.Kernel))
	}
	if a.CPUModel != b.CPUModel || a.CPUs != b.CPUs {
		diffs = append(diffs, fmt.Sprintf("CPU %d x %s vs %d x %s", a.CPUs, a.CPUModel, b.CPUs, b.CPUModel))
	}
	if len(diffs) == 0 {
		return ""
	}
	return "the runs differ in " + strings.Join(diffs, "; ")
}

// stored fetches a stored run's report.
func (l *runLoader) stored(ref string) (*bench.Report, error) {
	if l.client == nil {
		client, err := l.dial(l.c)
		if err != nil {
			return nil, fmt.Errorf("stored run %s: %w", ref, err)
		}
		l.client = client
	}
	rep, _, err := l.client.BenchReport(ref)
	return rep, err
}

// samples reads a file or a stored run.
func (l *runLoader) samples(arg string) (bench.Samples, error) {
	ref, ok, err := storedRef(arg)
	if err != nil {
		return nil, err
	}
	if !ok {
		var fp *bench.Fingerprint
		if rep, err := l.report(arg); err == nil { // a JSON report
			fp = &rep.Fingerprint
		}
		l.fps = append(l.fps, fp)
		return bench.ReadSamples(arg)
	}
	rep, err := l.stored(ref)
	if err != nil {
		return nil, err
	}
	l.fps = append(l.fps, &rep.Fingerprint)
	s := bench.SamplesOf(rep)
	if len(s) == 0 {
		return nil, fmt.Errorf("stored run %s: no results in it (every test skipped or failed)", ref)
	}
	return s, nil
}

// report reads a JSON report file or a stored run.
func (l *runLoader) report(arg string) (*bench.Report, error) {
	ref, ok, err := storedRef(arg)
	switch {
	case err != nil:
		return nil, err
	case ok:
		return l.stored(ref)
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := bench.ReadJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	return rep, nil
}

func benchRunsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list the runs stored with bench --store (ids for compare and plot: run:ID, last, last~N)",
		Flags: []cli.Flag{
			outputFlag,
			&cli.StringFlag{Name: "since", Value: "30d", Usage: "start: a duration back from now (90m, 7d) or RFC 3339"},
			&cli.StringFlag{Name: "until", Value: "now", Usage: "end: a duration back from now or RFC 3339"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return fmt.Errorf("bench runs: unexpected argument %q", c.Args().First())
			}
			since, until, err := timeRange(c)
			if err != nil {
				return err
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			runs, err := client.BenchRuns(since, until)
			if err != nil {
				return err
			}
			if len(runs.Runs) == 0 {
				return fmt.Errorf("no stored bench runs between %s and %s (store one with bpfperf bench --store)", fmtTime(since), fmtTime(until))
			}
			t := table{
				header: []string{"ID", "TIME", "TESTS", "FAILED", "KERNEL", "COMMIT", "LABEL"},
				fields: []string{"id", "time", "tests", "failed", "kernel", "git_commit", "label"},
			}
			for _, r := range runs.Runs {
				id, tests, failed := strconv.FormatUint(r.ID, 10), strconv.Itoa(r.Tests), strconv.Itoa(r.Failed)
				commit, dirty := strings.CutSuffix(r.Commit, "-dirty")
				if len(commit) > 12 {
					commit = commit[:12]
				}
				if dirty {
					commit += "-dirty"
				}
				t.rows = append(t.rows, []string{id, fmtTime(r.Time), tests, failed, r.Kernel, cmp.Or(commit, "-"), r.Label})
				t.raw = append(t.raw, []string{id, r.Time.UTC().Format(time.RFC3339Nano), tests, failed, r.Kernel, r.Commit, r.Label})
			}
			return render(c, c.App.Writer, runs.Runs, t)
		},
	}
}

// benchGetCommand downloads a stored run's report, in any output format,
// to a file or stdout.
func benchGetCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "write a stored run's report (table, json, csv, bmf, gobench) to a file or stdout",
		ArgsUsage: "ID|last|last~N",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "json", Usage: "table, json, csv, bmf or gobench"},
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "write to `FILE` instead of stdout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("bench get: takes one run (ID, last or last~N), got %d arguments", c.NArg())
			}
			ref := strings.TrimPrefix(c.Args().First(), "run:")
			if !runRefPattern.MatchString(ref) {
				return fmt.Errorf("bench get: %q is not a run: ID, last or last~N", ref)
			}
			format := c.String("output")
			switch format {
			case "table", "json", "csv", "bmf", "gobench":
			default:
				return fmt.Errorf("-o %q: want table, json, csv, bmf or gobench", format)
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			rep, _, err := client.BenchReport(ref)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := bench.Write(&buf, rep, format); err != nil {
				return err
			}
			if path := c.String("file"); path != "" {
				return os.WriteFile(path, buf.Bytes(), 0o644)
			}
			_, err = c.App.Writer.Write(buf.Bytes())
			return err
		},
	}
}
