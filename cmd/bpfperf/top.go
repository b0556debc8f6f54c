package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/top"
)

func topCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "top",
		Usage: "live view of the BPF programs: runs/s, avg ns/run, CPU %, owners, attach points; charts from history",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "delay", Aliases: []string{"d"}, Value: "1s", Usage: "refresh interval: a duration (500ms, 2s) or seconds (2)"},
			&cli.StringFlag{Name: "sort", Aliases: []string{"s"}, Value: "cpu", Usage: "sort column: id, type, name, runs, avg, avgload, cpu, sampled, cycles, ipc, owner, attach"},
			&cli.BoolFlag{Name: "reverse", Aliases: []string{"r"}, Usage: "reverse the sort"},
			&cli.StringFlag{Name: "filter", Aliases: []string{"f"}, Usage: "show programs whose name, type or owner comm contains this"},
			&cli.BoolFlag{Name: "once", Usage: "print one refresh (two readings -d apart) and exit"},
			outputFlag,
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if err := checkOutput(c); err != nil {
				return err
			}
			interval, err := parseDelay(c.String("delay"))
			if err != nil {
				return err
			}
			if _, err := top.ColumnByKey(c.String("sort")); err != nil {
				return fmt.Errorf("--sort: %w", err)
			}
			if !c.Bool("once") && !isTerminal(os.Stdout) {
				return fmt.Errorf("top: stdout is not a terminal; use --once -o table|json|csv")
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			host, kernel := hostKernel()
			if c.Bool("once") {
				rep, err := top.Once(client, top.OnceOptions{
					Host: host, Kernel: kernel, Interval: interval,
					Sort: c.String("sort"), Reverse: c.Bool("reverse"), Filter: c.String("filter"),
				})
				if err != nil {
					return err
				}
				if c.String("output") == "table" {
					fmt.Println(rep.Summary())
				}
				header, fields, rows, raw := rep.Table()
				return render(c, os.Stdout, rep, table{header: header, fields: fields, rows: rows, raw: raw})
			}
			m := top.New(client, top.Config{
				Host: host, Kernel: kernel, Interval: interval,
				Sort: c.String("sort"), Reverse: c.Bool("reverse"), Filter: c.String("filter"),
				Styles: top.NewStyles(lipgloss.NewRenderer(os.Stdout)),
			})
			return top.Run(m)
		},
	}
}

// parseDelay reads -d: a Go duration, or a number of seconds like top's.
func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, fmt.Errorf("-d %q: not a duration like 500ms or 2s", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if err := top.CheckInterval(d); err != nil {
		return 0, fmt.Errorf("-d %q: %w", s, err)
	}
	return d, nil
}

// hostKernel names this host and its kernel: the CLI runs where the daemon
// does.
func hostKernel() (host, kernel string) {
	host, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	return host, kernel
}
