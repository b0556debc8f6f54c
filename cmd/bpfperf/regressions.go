package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func regressionsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "regressions",
		Usage: "list the regressions, improvements and shifts the daemon found",
		Flags: slices.Concat([]cli.Flag{outputFlag}, timeRangeFlags("7d"), []cli.Flag{
			&cli.StringFlag{Name: "prog", Usage: "only this program's findings (a name)"},
		}),
		Subcommands: []*cli.Command{regressionsShowCommand(dial)},
		Action: func(c *cli.Context) error {
			client, since, until, err := listRange(c, dial)
			if err != nil {
				return err
			}
			list, err := client.Regressions(since, until, c.String("prog"))
			if err != nil {
				return err
			}
			t := table{
				header: []string{"ID", "TIME", "KIND", "PROGRAM", "TAGS", "NS/RUN", "RATIO", "95% CI", "P", "N", "P99"},
				fields: []string{"id", "time", "kind", "program", "old_tag", "new_tag", "before_ns_per_run", "after_ns_per_run", "ratio", "ratio_lo", "ratio_hi", "p", "n_before", "n_after", "p99_ratio", "by"},
			}
			for _, r := range list.Regressions {
				t.rows = append(t.rows, []string{r.ID, fmtTime(r.Time), r.Kind, r.Program, r.OldTag[:min(8, len(r.OldTag))] + "->" + r.NewTag[:min(8, len(r.NewTag))],
					fmt.Sprintf("%.0f->%.0f", r.BeforeNs, r.AfterNs), fmt.Sprintf("x%.2f", r.Ratio), fmt.Sprintf("%.2f-%.2f", r.RatioLo, r.RatioHi),
					fmt.Sprintf("%.2g", r.P), fmt.Sprintf("%d+%d", r.NBefore, r.NAfter), tailCell(r)})
				tailRatio := ""
				if r.Tail != nil {
					tailRatio = ftoa(r.Tail.Ratio)
				}
				t.raw = append(t.raw, []string{r.ID, r.Time.UTC().Format(time.RFC3339Nano), r.Kind, r.Program, r.OldTag, r.NewTag,
					ftoa(r.BeforeNs), ftoa(r.AfterNs), ftoa(r.Ratio), ftoa(r.RatioLo), ftoa(r.RatioHi), ftoa(r.P), strconv.Itoa(r.NBefore), strconv.Itoa(r.NAfter), tailRatio, r.By})
			}
			return render(c, os.Stdout, list.Regressions, t)
		},
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// tailCell is the list's P99 column: the latency windows' p99 ratio, and
// "(decided)" where the tail decided the finding; "-" without windows.
func tailCell(r api.Regression) string {
	if r.Tail == nil {
		return "-"
	}
	s := fmt.Sprintf("x%.2f", r.Tail.Ratio)
	if r.By == "p99" {
		s += " (decided)"
	}
	return s
}

func regressionsShowCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print one finding: the numbers, the windows, the top changed lines; -o writes its profile diff",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the pprof diff (after minus before; positive = grew) to `FILE`"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("regressions show: want one finding id")
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			r, err := client.Regression(c.Args().First())
			if err != nil {
				return err
			}
			printRegression(os.Stdout, r)
			if path := c.String("output"); path != "" {
				data, err := client.RegressionDiff(r.ID)
				if err != nil {
					return err
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					return err
				}
				fmt.Printf("profile diff written to %s: go tool pprof -top %s\n", path, path)
			}
			return nil
		},
	}
}

func printRegression(w io.Writer, r api.Regression) {
	fmt.Fprintf(w, "%s %s: %s (%s) id %d\n", r.Kind, r.ID, r.Program, r.Type, r.ProgID)
	if r.Kind == "shift" {
		fmt.Fprintf(w, "  version  %s, not reloaded; changed at %s\n", r.NewTag, fmtTime(r.Changed))
	} else {
		fmt.Fprintf(w, "  version  %s -> %s, reloaded %s\n", r.OldTag, r.NewTag, fmtTime(r.Changed))
	}
	fmt.Fprintf(w, "  ns/run   %.1f -> %.1f (medians), x%.3f, 95%% CI %.3f-%.3f\n", r.BeforeNs, r.AfterNs, r.Ratio, r.RatioLo, r.RatioHi)
	switch {
	case r.Controls > 0:
		fmt.Fprintf(w, "  drift    the machine: x%.3f (median of %d programs that did not change); each interval is corrected for it\n", r.Drift, r.Controls)
	default:
		fmt.Fprintf(w, "  drift    not measured: no other program ran one version over both windows, so a change of the machine reads as the program's\n")
	}
	fmt.Fprintf(w, "  test     Mann-Whitney U p=%.3g (alpha %g), minimum change %g%%\n", r.P, r.Alpha, 100*r.MinChange)
	fmt.Fprintf(w, "  before   %s .. %s, %d intervals\n", fmtTime(r.BeforeFrom), fmtTime(r.BeforeTo), r.NBefore)
	fmt.Fprintf(w, "  after    %s .. %s, %d intervals\n", fmtTime(r.AfterFrom), fmtTime(r.AfterTo), r.NAfter)
	fmt.Fprintf(w, "  load     %.0f..%.0f runs/s (intervals compared)\n", r.LoadLo, r.LoadHi)
	if tc := r.Tail; tc != nil {
		decided := ""
		if r.By == "p99" {
			decided = fmt.Sprintf("; the mean moved less than the minimum change (%g%%) or not significantly, the tail decided", 100*r.MinChange)
		}
		fmt.Fprintf(w, "  p99      %s -> %s, x%.3f (median p99 of %d and %d latency windows, %d and %d runs)%s\n",
			fmtDurationNs(tc.BeforeP99Ns), fmtDurationNs(tc.AfterP99Ns), tc.Ratio, tc.WindowsBefore, tc.WindowsAfter, tc.RunsBefore, tc.RunsAfter, decided)
	}
	ex := r.Explanation
	if ex.Off != "" {
		fmt.Fprintf(w, "  profile  %s\n", ex.Off)
		return
	}
	fmt.Fprintf(w, "  profile  %d windows before, %d after; CPU %% of one CPU, grown first:\n", ex.BeforeProfiles, ex.AfterProfiles)
	for _, ch := range ex.Top {
		fmt.Fprintf(w, "    %-8s %-40s %6.2f -> %6.2f (%+.2f)\n", ch.Level, ch.Name, ch.Before, ch.After, ch.Delta())
	}
	fmt.Fprintf(w, "  diff     bpfperf regressions show %s -o diff.pb.gz && go tool pprof -top diff.pb.gz\n", r.ID)
}
