package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func ownersCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "owners",
		Usage: "what each owner of BPF programs and maps (process, unit, container) costs this host, by CPU",
		Flags: []cli.Flag{
			outputFlag,
			&cli.StringFlag{Name: "since", Usage: "over a past window instead of now: a duration back from now (1h, 7d) or RFC 3339; owners that have exited keep their row"},
			&cli.StringFlag{Name: "until", Value: "now", Usage: "end of the --since window"},
			&cli.StringFlag{Name: "owner", Usage: "only this owner: comm[pid], pid, comm, systemd unit or container"},
			&cli.BoolFlag{Name: "triggered", Usage: "instead of who loaded the programs, the workloads whose work makes them run (cgroup, unit, container, pod, or an interrupt context) and what they cost, from the CPU profile over --since (default 1h)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return fmt.Errorf("owners: unexpected argument %q", c.Args().First())
			}
			if c.Bool("triggered") {
				return ownersTriggered(c, dial)
			}
			client, since, until, err := dialOptionalRange(c, dial)
			if err != nil {
				return err
			}
			o, err := client.Owners(since, until, c.String("owner"))
			if err != nil {
				return err
			}
			return render(c, os.Stdout, o, ownersTable(o.Owners, !since.IsZero()))
		},
	}
}

func ownersTable(rows []api.OwnerRow, window bool) table {
	t := table{
		header: []string{"OWNER", "UNIT/CONTAINER", "PROGS", "RUNS/S", "CPU%", "SAMPLED%", "MAPS", "MAP MEMORY"},
		fields: append([]string{"owner", "kind", "pid", "comm", "unit", "container", "cgroup", "programs", "runs_per_sec", "cpu_percent", "sampled_cpu_percent", "run_cnt", "run_time_ns", "maps", "map_bytes", "present"}, podFields...),
	}
	if window {
		t.header = append(t.header, "STATE")
	}
	for _, r := range rows {
		where := r.Container
		switch {
		case r.Pod != nil:
			where = r.Pod.String()
		case where == "":
			where = r.Unit
		}
		row := []string{r.Owner, dash(where), strconv.Itoa(r.Programs), fmtRate(r.RunsPerSec), fmtPercent(r.CPUPercent), fmtPercent(r.SampledCPUPercent), strconv.Itoa(r.Maps), fmtBytes(int64(r.MapBytes))}
		if window {
			state := "present"
			if !r.Present {
				state = "gone"
			}
			row = append(row, state)
		}
		t.rows = append(t.rows, row)
		t.raw = append(t.raw, append([]string{r.Owner, r.Kind, strconv.Itoa(r.PID), r.Comm, r.Unit, r.Container, r.Cgroup, strconv.Itoa(r.Programs), raw(r.RunsPerSec), raw(r.CPUPercent), raw(r.SampledCPUPercent), fmtCount(r.RunCnt), fmtCount(r.RunTimeNs), strconv.Itoa(r.Maps), strconv.FormatUint(r.MapBytes, 10), strconv.FormatBool(r.Present)}, podCells(r.Pod)...))
	}
	return t
}

// ownersTriggered is `owners --triggered`: every program's triggers over
// --since (default the last hour), added up by workload; --owner keeps
// one workload's.
func ownersTriggered(c *cli.Context, dial clientFactory) error {
	client, since, until, err := dialOptionalRange(c, dial)
	if err != nil {
		return err
	}
	t, err := client.Triggers("", c.String("owner"), since, until)
	if err != nil {
		return err
	}
	rows := byWorkload(t.Rows)
	if rows == nil {
		rows = []workloadRow{}
	}
	return render(c, os.Stdout, rows, workloadsTable(rows))
}

// dialOptionalRange is dialRange where --since may be empty: the range is
// then zero, for the daemon's default.
func dialOptionalRange(c *cli.Context, dial clientFactory) (client *api.Client, since, until time.Time, err error) {
	if c.String("since") == "" {
		client, err = dial(c)
		return client, since, until, err
	}
	return dialRange(c, dial)
}
