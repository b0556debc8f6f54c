package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func latencyCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name: "latency",
		Usage: "time every run of one program for a while (fentry/fexit around it) and print the distribution: " +
			"runs, mean, p50, p90, p99, p99.9 and max, and the runs by power of two; stored for history --latency",
		ArgsUsage: "PROG (an id, a name, name@tag, or an identity)",
		Flags: []cli.Flag{outputFlag,
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: 10 * time.Second, Usage: "how long to time the program's runs (100ms to 10m)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			prog, err := oneArg(c, "PROG")
			if err != nil {
				return err
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			w, err := client.Latency(prog, c.Duration("duration"))
			if err != nil {
				return err
			}
			if c.String("output") != "table" {
				return render(c, os.Stdout, w, latencyTable([]api.LatencyWindow{w}))
			}
			if err := renderTable(os.Stdout, latencyTable([]api.LatencyWindow{w})); err != nil {
				return err
			}
			fmt.Println()
			writeBuckets(os.Stdout, w.Buckets)
			fmt.Println()
			fmt.Println(latencyFootnote(w))
			if line := perRunLine(w); line != "" {
				fmt.Println(line)
			}
			return nil
		},
	}
}

// latencyTable is one row per window.
func latencyTable(ws []api.LatencyWindow) table {
	t := table{
		header: []string{"WINDOW END", "ID", "NAME", "RUNS", "MEAN", "P50", "P90", "P99", "P99.9", "MAX", "UNTIMED"},
		fields: []string{"end", "id", "name", "runs", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "untimed", "floor_ns", "added_ns_per_run", "error_pct", "duration_s",
			"per_run_event", "per_run_runs", "per_run_mean", "per_run_p50", "per_run_p90", "per_run_p99", "per_run_p999", "per_run_max"},
	}
	for _, w := range ws {
		id := strconv.FormatUint(uint64(w.ID), 10)
		runs, untimed := strconv.FormatUint(w.Runs, 10), strconv.FormatUint(w.Untimed, 10)
		t.rows = append(t.rows, []string{w.End.Local().Format("2006-01-02 15:04:05"), id, w.Name, runs,
			fmtDurationNs(w.MeanNs), fmtDurationNs(w.P50Ns), fmtDurationNs(w.P90Ns), fmtDurationNs(w.P99Ns), fmtDurationNs(w.P999Ns), fmtDurationNs(w.MaxNs), untimed})
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
		raw := []string{w.End.UTC().Format(time.RFC3339Nano), id, w.Name, runs,
			f(w.MeanNs), f(w.P50Ns), f(w.P90Ns), f(w.P99Ns), f(w.P999Ns), f(w.MaxNs), untimed, f(w.FloorNs), f(w.AddedNsPerRun), f(w.ErrorPct), f(w.Duration)}
		if e := w.PerRun; e != nil {
			raw = append(raw, e.Event, strconv.FormatUint(e.Runs, 10), f(e.Mean), f(e.P50), f(e.P90), f(e.P99), f(e.P999), f(e.Max))
		} else {
			raw = append(raw, "", "", "", "", "", "", "", "")
		}
		t.raw = append(t.raw, raw)
	}
	return t
}

// writeBuckets draws the runs by power of two, like bpftrace's hist().
func writeBuckets(w io.Writer, bs []api.LatencyBucket) {
	var most uint64
	for _, b := range bs {
		most = max(most, b.Runs)
	}
	const width = 40
	for _, b := range bs {
		hi := "+inf"
		if b.HiNs > 0 {
			hi = fmtDurationNs(float64(b.HiNs))
		}
		bar := int(b.Runs * width / max(most, 1))
		if b.Runs > 0 && bar == 0 {
			bar = 1
		}
		fmt.Fprintf(w, "%-24s %10d |%-*s|\n", "["+fmtDurationNs(float64(b.LoNs))+", "+hi+")", b.Runs, width, strings.Repeat("@", bar))
	}
}

// latencyFootnote says what the figures are and what timing cost.
func latencyFootnote(w api.LatencyWindow) string {
	s := fmt.Sprintf("%d runs timed in %.1f s (%s). Figures are less the timing floor of %s and within %.1f%%; the buckets are raw.",
		w.Runs, w.Duration, w.Stopped, fmtDurationNs(w.FloorNs), w.ErrorPct)
	if w.AddedNsPerRun > 0 {
		s += fmt.Sprintf(" While open, timing added about %s to each run's bpf_stats run time (an event says so in `bpfperf events`).", fmtDurationNs(w.AddedNsPerRun))
	}
	return s
}

// perRunLine is the window's per-run event in a line ("cycles per run:
// ..."), or why it was not counted; "" where none was asked for.
func perRunLine(w api.LatencyWindow) string {
	e := w.PerRun
	if e == nil {
		if w.PerRunUnavailable != "" {
			return "Per-run event not counted: " + w.PerRunUnavailable + "."
		}
		return ""
	}
	n := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	s := fmt.Sprintf("%s per run: mean %s, p50 %s, p90 %s, p99 %s, p99.9 %s, max %s over %d runs (less the timing's own %s).",
		e.Event, n(e.Mean), n(e.P50), n(e.P90), n(e.P99), n(e.P999), n(e.Max), e.Runs, n(e.Floor))
	if e.Missed > 0 {
		s += fmt.Sprintf(" %d timed runs were not counted (the event was not on their CPU).", e.Missed)
	}
	return s
}

// latencyHistory renders `history PROG --latency`: one line per window.
func latencyHistory(c *cli.Context, client *api.Client, prog string, since, until time.Time) error {
	h, err := client.LatencyHistory(prog, since, until)
	if err != nil {
		return err
	}
	return render(c, os.Stdout, h.Windows, latencyTable(h.Windows))
}

// latencyLine is show's "latency" field: the newest window.
func latencyLine(w *api.LatencyWindow) string {
	if w == nil {
		return "- (no window yet: bpfperf latency PROG)"
	}
	s := fmt.Sprintf("p50 %s, p99 %s, p99.9 %s, max %s over %d runs",
		fmtDurationNs(w.P50Ns), fmtDurationNs(w.P99Ns), fmtDurationNs(w.P999Ns), fmtDurationNs(w.MaxNs), w.Runs)
	if e := w.PerRun; e != nil {
		s += fmt.Sprintf("; %s p50 %.0f, p99 %.0f", e.Event, e.P50, e.P99)
	}
	return s + fmt.Sprintf(" (window ending %s)", w.End.Local().Format("2006-01-02 15:04:05"))
}

// latencyStatusText is status's "latency" field: whether windows can run,
// what timing costs, and what is timed.
func latencyStatusText(l *api.LatencyStatus) string {
	if !l.Available {
		return "unavailable: " + l.Reason
	}
	s := fmt.Sprintf("available; timing floor %s, adds about %s to each run of a timed program; %d of %d windows open, %d stored since start",
		fmtDurationNs(l.FloorNs), fmtDurationNs(l.AddedNsPerRun), l.Timing, l.Max, l.Windows)
	switch {
	case l.Event == "none" || l.Event == "":
	case l.EventUnavailable != "":
		s += fmt.Sprintf("; %s per run not counted: %s", l.Event, l.EventUnavailable)
	default:
		s += fmt.Sprintf("; counts %s per run (timing's own: %.0f)", l.Event, l.EventFloor)
	}
	if len(l.Programs) > 0 {
		s += fmt.Sprintf("; scheduled: %s, %v every %v", strings.Join(l.Programs, ", "),
			time.Duration(l.WindowMs)*time.Millisecond, time.Duration(l.EveryMs)*time.Millisecond)
	}
	if l.LastError != "" {
		s += "; last error: " + l.LastError
	}
	return s
}
