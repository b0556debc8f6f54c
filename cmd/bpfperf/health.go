package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

// healthStalled is health's exit status for a sampler that stopped; no
// daemon at all exits 1 as every command does.
const healthStalled = 1

func healthCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "liveness check: exit 0 while the daemon's sampler ticks, 1 with one line when its last tick is older than 10 intervals (at least 10s), before its first tick, or when the daemon does not answer",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "max-age", Usage: "oldest last tick that passes (default: 10 intervals, at least 10s)"},
		},
		Action: func(c *cli.Context) error {
			if c.Duration("max-age") < 0 {
				return fmt.Errorf("health: --max-age %v: want a positive duration", c.Duration("max-age"))
			}
			_, s, err := daemonStatus(c, dial)
			if err != nil {
				return err
			}
			ok, line := api.Health(s, time.Now(), c.Duration("max-age"))
			if !ok {
				return exitError{healthStalled, line}
			}
			fmt.Println(line)
			return nil
		},
	}
}
