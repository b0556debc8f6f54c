package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/bench/plots"
)

func benchPlotCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "write SVG plots of one or more runs: ns vs tail-call chain length, map access time vs map size per key pattern",
		ArgsUsage: "REPORT...",
		Description: "Each REPORT is a JSON report from bench --save, or a stored run: run:ID, or ID, last, last~N when no such file exists.\n" +
			"Several REPORTs draw on one chart, a line per report named by its kernel release (and its file or run where kernels tie).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: ".", Usage: "write tailcalls.svg and maps.svg into `DIR`"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("bench plot: needs one REPORT or more (JSON reports from bench --save, or stored runs: run:ID, last, last~N)")
			}
			l := &runLoader{c: c, dial: dial}
			var runs []plots.Run
			for _, arg := range c.Args().Slice() {
				run, err := l.plotRun(arg)
				if err != nil {
					return err
				}
				runs = append(runs, run)
			}
			files, err := plots.Write(runs, c.String("dir"))
			for _, p := range files {
				fmt.Fprintln(c.App.Writer, "wrote", p)
			}
			return err
		},
	}
}

// plotRun reads one REPORT and says where it came from, for the legend:
// the file as named, or the stored run's id and label.
func (l *runLoader) plotRun(arg string) (plots.Run, error) {
	ref, ok, err := storedRef(arg)
	if err != nil {
		return plots.Run{}, err
	}
	if !ok {
		rep, err := l.report(arg)
		return plots.Run{Report: rep, Source: arg}, err
	}
	rep, id, err := l.stored(ref)
	if err != nil {
		return plots.Run{}, err
	}
	src := fmt.Sprintf("run %d", id)
	if label := l.runLabel(rep, id); label != "" {
		src = label + " (" + src + ")"
	}
	return plots.Run{Report: rep, Source: src}, nil
}

// runLabel finds a stored run's label in the listing at its start time
// (runs are keyed by it). The label only names a line, so a failure to
// find it leaves the run id alone rather than failing the plot.
func (l *runLoader) runLabel(rep *bench.Report, id uint64) string {
	runs, err := l.client.BenchRuns(rep.Time, rep.Time.Add(time.Second))
	if err != nil {
		return ""
	}
	for _, r := range runs.Runs {
		if r.ID == id {
			return r.Label
		}
	}
	return ""
}
