package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/bench"
)

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
			if err := checkFormat(c, "table", "json"); err != nil {
				return err
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
