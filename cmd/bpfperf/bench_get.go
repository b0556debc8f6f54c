package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/bench"
)

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
			if err := checkFormat(c, "table", "json", "csv", "bmf", "gobench"); err != nil {
				return err
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
			if err := bench.Write(&buf, rep, c.String("output")); err != nil {
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
