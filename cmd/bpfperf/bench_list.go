package main

import (
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/bench"
)

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
					return fmt.Errorf("--filter: %w", err)
				}
				cfg.Filter = re
			}
			return bench.WriteList(c.App.Writer, bench.Select(bench.Suite(), cfg))
		},
	}
}
