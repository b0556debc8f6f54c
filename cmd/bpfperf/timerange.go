package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

// timeRangeFlags are --since and --until for a command that reads a stretch
// of history; timeRange reads them.
func timeRangeFlags(defaultSince string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "since", Value: defaultSince, Usage: "start: a duration back from now (90m, 7d) or RFC 3339"},
		&cli.StringFlag{Name: "until", Value: "now", Usage: "end: a duration back from now or RFC 3339"},
	}
}

// timeRange reads --since and --until and checks they make a range.
func timeRange(c *cli.Context) (since, until time.Time, err error) {
	now := time.Now()
	if since, err = api.ParseTime(c.String("since"), now); err != nil {
		return since, until, fmt.Errorf("--since: %w", err)
	}
	if until, err = api.ParseTime(c.String("until"), now); err != nil {
		return since, until, fmt.Errorf("--until: %w", err)
	}
	if !until.After(since) {
		return since, until, fmt.Errorf("--until %s is not after --since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	return since, until, nil
}

// dialRange reads --since and --until, then dials the daemon: what every
// command that queries a time range does first, in that order (a bad range
// is reported even when no daemon runs).
func dialRange(c *cli.Context, dial clientFactory) (client *api.Client, since, until time.Time, err error) {
	if since, until, err = timeRange(c); err != nil {
		return nil, since, until, err
	}
	client, err = dial(c)
	return client, since, until, err
}

// listRange opens a listing over a time range: it checks -o, refuses
// positional arguments, then reads --since/--until and dials (dialRange).
func listRange(c *cli.Context, dial clientFactory) (client *api.Client, since, until time.Time, err error) {
	if err = checkOutput(c); err != nil {
		return nil, since, until, err
	}
	if err = noArgs(c); err != nil {
		return nil, since, until, err
	}
	return dialRange(c, dial)
}
