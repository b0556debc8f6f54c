package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves each command's flags in front of its positional
// arguments. urfave/cli v2 stops parsing flags at the first positional, but
// people type `bpfperf history PROG --since 1h`.
func interspersed(app *cli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	return append([]string{args[0]}, reorder(app.Flags, app.Commands, args[1:])...)
}

// reorder handles one level: this level's flags first, then a subcommand
// (reordered in turn) or the positionals. "--" and what follows stay last.
func reorder(flags []cli.Flag, cmds []*cli.Command, args []string) []string {
	var opts, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i:]...)
			return append(opts, pos...)
		case len(a) > 1 && a[0] == '-':
			opts = append(opts, a)
			if !strings.Contains(a, "=") && takesValue(flags, strings.TrimLeft(a, "-")) && i+1 < len(args) {
				i++
				opts = append(opts, args[i])
			}
		case len(pos) == 0 && findCommand(cmds, a) != nil:
			cmd := findCommand(cmds, a)
			if runsCommand(cmd) {
				return append(append(opts, a), flagsThenCommand(cmd.Flags, args[i+1:])...)
			}
			return append(append(opts, a), reorder(cmd.Flags, cmd.Subcommands, args[i+1:])...)
		default:
			pos = append(pos, a)
		}
	}
	return append(opts, pos...)
}

// runsCommand says whether cmd's arguments are a command line of their
// own (bpfperf stat CMD ARGS...), whose flags are not ours to move.
func runsCommand(cmd *cli.Command) bool { return strings.HasPrefix(cmd.ArgsUsage, "[--] CMD") }

// flagsThenCommand keeps args as they are up to the first positional (the
// command), and puts a "--" in front of it so that the parser takes none
// of the command's flags for ours: `bpfperf stat ls -l`.
func flagsThenCommand(flags []cli.Flag, args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args
		case len(a) > 1 && a[0] == '-':
			if !strings.Contains(a, "=") && takesValue(flags, strings.TrimLeft(a, "-")) {
				i++
			}
		default:
			return append(append(slices.Clone(args[:i]), "--"), args[i:]...)
		}
	}
	return args
}

func takesValue(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	// Unknown flags (help, version, typos) are left for the parser to judge.
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// noArgs refuses positional arguments to a command that takes none.
func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", c.Command.Name, c.Args().First())
	}
	return nil
}

// oneArg returns the single positional argument a command takes.
func oneArg(c *cli.Context, name string) (string, error) {
	switch c.NArg() {
	case 0:
		return "", fmt.Errorf("%s: missing %s", c.Command.Name, name)
	case 1:
		return c.Args().First(), nil
	default:
		return "", fmt.Errorf("%s: takes one %s, got %d arguments (flags go before %s)", c.Command.Name, name, c.NArg(), name)
	}
}

// limitArgs makes every command refuse more positional arguments than its
// ArgsUsage names ("PROG (...)" is one, "BASE NEW" two, "[PROFILE...]" any
// number, none for a command without it), before its action runs: an
// extra argument is a mistake to report, not a thing to ignore.
func limitArgs(cmds []*cli.Command) {
	for _, cmd := range cmds {
		limitArgs(cmd.Subcommands)
		if cmd.Action == nil {
			continue
		}
		usage := cmd.ArgsUsage
		if i := strings.Index(usage, "("); i >= 0 {
			usage = usage[:i]
		}
		if strings.Contains(usage, "...") {
			continue
		}
		most, action := len(strings.Fields(usage)), cmd.Action
		cmd.Action = func(c *cli.Context) error {
			if c.NArg() > most {
				if most == 0 {
					return fmt.Errorf("%s: unexpected argument %q (it takes none)", c.Command.FullName(), c.Args().First())
				}
				return fmt.Errorf("%s: takes %s, got %d arguments (%q is one too many)", c.Command.FullName(), strings.TrimSpace(usage), c.NArg(), c.Args().Get(most))
			}
			return action(c)
		}
	}
}
