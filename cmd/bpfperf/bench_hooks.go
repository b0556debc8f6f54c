package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/bench/hooks"
)

// benchHooksCommand is `bpfperf bench hooks`: what each kind of hook costs
// per event on this kernel, beyond the program's run time.
func benchHooksCommand() *cli.Command {
	def := hooks.DefaultConfig()
	return &cli.Command{
		Name:  "hooks",
		Usage: "measure what each hook costs per real event on this kernel (a minimal program attached vs none), and how much of it run_time_ns shows",
		Description: "Attaches a minimal program to each kind of hook in turn, makes real events (getppid() calls for the\n" +
			"syscall hooks, UDP packets over a veth pair for xdp, tc and socket_filter) on one CPU, and times them\n" +
			"without and with the program, in alternating rounds. Needs root. Hooks: " + strings.Join(hooks.Names(), ", ") + ".",
		Flags: []cli.Flag{
			outputFlag,
			&cli.StringSliceFlag{Name: "hook", Usage: "measure only this `HOOK` (repeat or comma-separate; default: all)"},
			&cli.IntFlag{Name: "rounds", Value: def.Rounds, Usage: "rounds of each measurement"},
			&cli.IntFlag{Name: "cpu", Usage: "make the events on `CPU`"},
			&cli.IntFlag{Name: "syscalls", Value: def.Syscalls, Usage: "system calls per round"},
			&cli.IntFlag{Name: "packets", Value: def.Packets, Usage: "packets per round"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			cfg := def
			cfg.Rounds, cfg.CPU, cfg.Syscalls, cfg.Packets = c.Int("rounds"), c.Int("cpu"), c.Int("syscalls"), c.Int("packets")
			for _, h := range c.StringSlice("hook") {
				cfg.Hooks = append(cfg.Hooks, strings.Split(h, ",")...)
			}
			rs, err := hooks.Measure(cfg)
			if err != nil {
				return err
			}
			t := table{header: hooks.Header, fields: hooks.Fields, rows: hooks.Rows(rs), raw: hooks.Raw(rs)}
			if err := render(c, c.App.Writer, rs, t); err != nil {
				return err
			}
			if c.String("output") == "table" {
				if note := hooks.Note(rs); note != "" {
					fmt.Fprintln(c.App.Writer, note)
				}
			}
			for _, r := range rs {
				if r.Unavailable == "" {
					return nil
				}
			}
			return fmt.Errorf("no hook could be measured: %s", rs[0].Unavailable)
		},
	}
}
