package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/bench"
)

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
