package main

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

func benchRunsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list the runs stored with bench --store (ids for compare and plot: run:ID, last, last~N)",
		Flags: append([]cli.Flag{outputFlag}, timeRangeFlags("30d")...),
		Action: func(c *cli.Context) error {
			client, since, until, err := listRange(c, dial)
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
