package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

// clientFactory opens a client for the daemon named by the global flags.
// Commands get it passed in so tests can point them anywhere.
type clientFactory func(c *cli.Context) (*api.Client, error)

func dialDaemon(c *cli.Context) (*api.Client, error) {
	return api.Dial(c.String("socket"), c.Duration("timeout"))
}

func newApp(dial clientFactory) *cli.App {
	app := &cli.App{
		Name:    "bpfperf",
		Usage:   "see how fast the BPF programs on this host run",
		Version: version,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Value: api.DefaultSocket, EnvVars: []string{"BPFPERF_SOCKET"}, Usage: "bpfperfd's API socket"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, EnvVars: []string{"BPFPERF_TIMEOUT"}, Usage: "how long to wait for the daemon"},
		},
		Commands: []*cli.Command{
			statusCommand(dial),
			healthCommand(dial),
			progsCommand(dial),
			showCommand(dial),
			historyCommand(dial),
			eventsCommand(dial),
			storeCommand(dial),
			exportCommand(dial),
			profileCommand(dial),
			topCommand(dial),
			countersCommand(dial),
			benchCommand(dial),
			statCommand(dial),
			mapsCommand(dial),
			ownersCommand(dial),
			triggersCommand(dial),
			hooksCommand(dial),
			latencyCommand(dial),
			regressionsCommand(dial),
			checkCommand(dial),
		},
		// Errors are printed once, as one line, by main.
		ExitErrHandler:  func(*cli.Context, error) {},
		HideHelpCommand: true,
	}
	quietUsageErrors(app.Commands)
	limitArgs(app.Commands)
	app.OnUsageError = usageError
	return app
}

// usageError keeps a bad flag to one line instead of a page of help.
func usageError(_ *cli.Context, err error, _ bool) error { return err }

func quietUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		quietUsageErrors(c.Subcommands)
	}
}
