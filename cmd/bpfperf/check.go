package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

// exitError makes main exit with code after printing the message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// Exit codes of bpfperf check.
const (
	checkSlower    = 1
	checkUndecided = 2
)

func checkCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "CI gate: exit 1 if PROG's current version is significantly slower than the baseline by more than --max-regression, 0 if not, 2 if the data cannot decide",
		ArgsUsage: "PROG",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "max-regression", Value: "10%", Usage: "largest slowdown of median ns/run that passes"},
			&cli.StringFlag{Name: "baseline", Usage: "a tag, or a time (RFC 3339 or a duration back) before which is the baseline (default: the previous version)"},
		}, timeRangeFlags("7d")...),
		Action: func(c *cli.Context) error {
			// Everything that is not a verdict (bad input, no daemon)
			// exits 2 too: the gate cannot decide.
			res, err := runCheck(c, dial)
			if err != nil {
				return exitError{checkUndecided, err.Error()}
			}
			line := fmt.Sprintf("%s %s: ns/run x%.3f (95%% CI %.3f-%.3f, p=%.3g, %d+%d intervals) vs %s, limit +%g%%; %s",
				res.Program, res.Current, res.Ratio, res.RatioLo, res.RatioHi, res.P, res.NBefore, res.NAfter, res.Baseline, 100*res.Limit, driftNote(res.Comparison))
			switch res.Verdict {
			case api.VerdictSlower:
				return exitError{checkSlower, "slower: " + line}
			case api.VerdictUndecided:
				return exitError{checkUndecided, fmt.Sprintf("cannot decide: %s: %s vs %s (%d+%d intervals at matched load)", res.Undecided, res.Current, res.Baseline, res.NBefore, res.NAfter)}
			}
			fmt.Println("ok: " + line)
			return nil
		},
	}
}

func runCheck(c *cli.Context, dial clientFactory) (api.Check, error) {
	if c.NArg() != 1 {
		return api.Check{}, fmt.Errorf("check: want one program name")
	}
	limit, err := api.ParsePercent(c.String("max-regression"))
	if err != nil {
		return api.Check{}, fmt.Errorf("--max-regression: %w", err)
	}
	client, since, until, err := dialRange(c, dial)
	if err != nil {
		return api.Check{}, err
	}
	return client.Check(c.Args().First(), c.String("baseline"), limit, since, until)
}

// driftNote says whether the machine's own change was divided out of a
// comparison, and by what, in a few words for one line.
func driftNote(c api.Comparison) string {
	if c.Controls == 0 {
		return "the machine's drift not measured (no other program ran one version on both sides)"
	}
	return fmt.Sprintf("the machine's drift x%.3f divided out (median of %d programs that did not change)", c.Drift, c.Controls)
}
