package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func hooksCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "hooks",
		Usage:     "what the kernel's hook machinery around the programs costs, outside their run_time_ns (syscall tracepoints' glue and slow path, raw tracepoints, kprobes, kretprobes, kprobe_multi, uprobes, uretprobes, fentry trampolines, bpf_stats' clock), from the CPU profile: per run and beside run time",
		ArgsUsage: "[PROG] (only the hooks it is attached to)",
		Flags:     append([]cli.Flag{outputFlag}, timeRangeFlags("1h")...),
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 1 {
				return fmt.Errorf("hooks: unexpected argument %q", c.Args().Get(1))
			}
			client, since, until, err := dialRange(c, dial)
			if err != nil {
				return err
			}
			h, err := client.Hooks(c.Args().First(), since, until)
			if err != nil {
				return err
			}
			return render(c, os.Stdout, h, hooksTable(h.Rows))
		},
	}
}

func hooksTable(rows []api.HookRow) table {
	t := table{header: []string{"HOOK", "SAMPLES", "CPU%", "NS/RUN", "VS RUN_TIME", "PROGRAMS"},
		fields: []string{"hook", "samples", "cpu_ns", "cpu_percent", "ns_per_run", "run_time_ratio", "programs"}}
	for _, r := range rows {
		var progs []string
		for _, p := range r.Programs {
			progs = append(progs, p.Name+" ("+strconv.FormatUint(uint64(p.ID), 10)+")")
		}
		t.rows = append(t.rows, []string{r.Hook, strconv.FormatInt(r.Samples, 10), fmtPercent(&r.CPUPercent), fmtNs(r.NsPerRun), fmtRatio(r.RunTimeRatio), dash(strings.Join(progs, ", "))})
		t.raw = append(t.raw, []string{r.Hook, strconv.FormatInt(r.Samples, 10), strconv.FormatInt(r.CPUNs, 10), strconv.FormatFloat(r.CPUPercent, 'f', -1, 64), raw(r.NsPerRun), raw(r.RunTimeRatio), strings.Join(progs, ";")})
	}
	return t
}

// fmtRatio is a hook's cost beside run time: "1.2x", "-" for none.
func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64) + "x"
}

// hookLine is show's "hook overhead" field: each hook the program is
// attached to, per run and beside run time.
func hookLine(h api.Hooks, err error) string {
	if err != nil {
		return "- (" + err.Error() + ")"
	}
	var parts []string
	for _, r := range h.Rows {
		part := r.Hook + " " + fmtNs(r.NsPerRun) + "/run (" + fmtRatio(r.RunTimeRatio) + " run_time"
		if len(r.Programs) > 1 {
			part += fmt.Sprintf(", shared by %d programs", len(r.Programs))
		}
		parts = append(parts, part+")")
	}
	return strings.Join(parts, "; ")
}
