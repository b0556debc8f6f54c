package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/daemon"
)

func eventsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "list what changed: programs loaded, unloaded, new versions, stats mode, daemon start/stop",
		Flags: []cli.Flag{
			outputFlag,
			&cli.StringFlag{Name: "since", Value: "1d", Usage: "start: a duration back from now (90m, 7d) or RFC 3339"},
			&cli.StringFlag{Name: "until", Value: "now", Usage: "end: a duration back from now or RFC 3339"},
			&cli.StringFlag{Name: "prog", Usage: "only this program's events: an id, a name or name@tag"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return fmt.Errorf("events: unexpected argument %q", c.Args().First())
			}
			since, until, err := timeRange(c)
			if err != nil {
				return err
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			ev, err := client.Events(since, until, c.String("prog"))
			if err != nil {
				return err
			}
			t := table{
				header: []string{"TIME", "KIND", "ID", "NAME", "TAG", "DETAIL"},
				fields: []string{"time", "kind", "id", "name", "tag", "detail"},
			}
			for _, e := range ev.Events {
				id := ""
				if e.ID != 0 {
					id = strconv.FormatUint(uint64(e.ID), 10)
				}
				t.rows = append(t.rows, []string{fmtTime(e.Time), e.Kind, id, e.Name, e.Tag, e.Detail})
				t.raw = append(t.raw, []string{e.Time.UTC().Format(time.RFC3339Nano), e.Kind, id, e.Name, e.Tag, e.Detail})
			}
			return render(c, os.Stdout, ev.Events, t)
		},
	}
}

// timeRange reads --since and --until and checks they make a range.
func timeRange(c *cli.Context) (since, until time.Time, err error) {
	now := time.Now()
	if since, err = daemon.ParseTime(c.String("since"), now); err != nil {
		return since, until, fmt.Errorf("--since: %w", err)
	}
	if until, err = daemon.ParseTime(c.String("until"), now); err != nil {
		return since, until, fmt.Errorf("--until: %w", err)
	}
	if !until.After(since) {
		return since, until, fmt.Errorf("--until %s is not after --since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	return since, until, nil
}
