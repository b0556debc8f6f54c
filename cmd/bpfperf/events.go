package main

import (
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

func eventsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "list what changed: programs loaded, unloaded, new versions, stats mode, daemon start/stop",
		Flags: slices.Concat([]cli.Flag{outputFlag}, timeRangeFlags("1d"), []cli.Flag{
			&cli.StringFlag{Name: "prog", Usage: "only this program's events (its identity's, every version): an id, a name, name@tag or an identity"},
		}),
		Action: func(c *cli.Context) error {
			client, since, until, err := listRange(c, dial)
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
