package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func progsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "progs",
		Usage: "list loaded BPF programs with runs/s, avg ns/run and CPU % over the last interval",
		Flags: []cli.Flag{
			outputFlag,
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list unloaded programs still in the store"},
			&cli.BoolFlag{Name: "counters", Usage: "per-run perf counters (cpu-clock, cycles, instructions, IPC, LLC misses) and the mechanism behind them"},
			&cli.StringFlag{Name: "group", Usage: "`name`: one row per type and name, summing the programs that share it (one object on many devices or cgroups)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			rows, err := client.Progs(c.Bool("all"))
			if err != nil {
				return err
			}
			if c.Bool("counters") {
				return progsCounters(c, client, rows)
			}
			switch c.String("group") {
			case "":
			case "name":
				rows = api.SumByName(rows)
			default:
				return fmt.Errorf("--group %q: the one grouping is name", c.String("group"))
			}
			return render(c, os.Stdout, rows, progsTable(rows, c.Bool("all")))
		},
	}
}

func progsTable(rows []api.ProgRow, all bool) table {
	t := table{
		// SAMPLED% is the share of CPU profile samples: unlike CPU%, it
		// covers the tail-call targets the kernel charges to the entry.
		header: []string{"ID", "TYPE", "NAME", "WHERE", "TAG", "RUNS/S", "AVG/RUN", "CPU%", "SAMPLED%", "RUN_CNT", "RUN_TIME_NS"},
		fields: append([]string{"id", "type", "name", "where", "tag", "runs_per_sec", "avg_ns_per_run", "cpu_percent", "sampled_cpu_percent", "run_cnt", "run_time_ns", "recursion_misses", "loaded", "identity_id"}, podFields...),
	}
	// POD only where some program runs in a pod the CRI named: most hosts
	// have none.
	pods := slices.ContainsFunc(rows, func(r api.ProgRow) bool { return r.Pod != nil })
	if pods {
		t.header = slices.Insert(t.header, 4, "POD")
	}
	if all {
		t.header = append(t.header, "STATE")
	}
	for _, r := range rows {
		name := r.Name
		if r.Own {
			name += " (bpfperfd)"
		}
		id := strconv.FormatUint(uint64(r.ID), 10)
		if r.Instances > 1 {
			id = fmt.Sprintf("%d progs", r.Instances)
		}
		row := []string{id, r.Type, name, orDash(r.Where), r.Tag, fmtRate(r.RunsPerSec), fmtNs(r.AvgNsPerRun), fmtPercent(r.CPUPercent), fmtPercent(r.SampledCPUPercent), fmtCount(r.RunCnt), fmtCount(r.RunTimeNs)}
		if pods {
			pod := "-"
			if r.Pod != nil {
				pod = r.Pod.String()
			}
			row = slices.Insert(row, 4, pod)
		}
		if all {
			state := "loaded"
			if !r.Loaded {
				state = "unloaded " + fmtTime(r.UnloadedAt)
			}
			row = append(row, state)
		}
		t.rows = append(t.rows, row)
		t.raw = append(t.raw, append([]string{strconv.FormatUint(uint64(r.ID), 10), r.Type, r.Name, r.Where, r.Tag, raw(r.RunsPerSec), raw(r.AvgNsPerRun), raw(r.CPUPercent), raw(r.SampledCPUPercent), fmtCount(r.RunCnt), fmtCount(r.RunTimeNs), fmtCount(r.RecursionMisses), strconv.FormatBool(r.Loaded), r.IdentityID}, podCells(r.Pod)...))
	}
	return t
}

// orDash is s, or "-" for none.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
