package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func triggersCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "triggers",
		Usage:     "who makes each program run: the cgroup, unit, container or pod whose work fired its hook, or the interrupt context (softirq/net_rx with its devices), from the CPU profile's samples",
		ArgsUsage: "[PROG] (an id, a name, name@tag or an identity; every program without)",
		Flags: append([]cli.Flag{outputFlag,
			&cli.StringFlag{Name: "workload", Usage: "only this workload: its name as listed, a systemd unit, a container, a pod uid or a cgroup path"},
		}, timeRangeFlags("1h")...),
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 1 {
				return fmt.Errorf("triggers: unexpected argument %q", c.Args().Get(1))
			}
			client, since, until, err := dialRange(c, dial)
			if err != nil {
				return err
			}
			t, err := client.Triggers(c.Args().First(), c.String("workload"), since, until)
			if err != nil {
				return err
			}
			return render(c, os.Stdout, t, triggersTable(t.Rows))
		},
	}
}

// triggerFields are the CSV columns of a trigger row, as the JSON names
// them.
var triggerFields = append([]string{"prog_id", "prog_name", "workload", "context", "cgroup", "unit", "container", "devices", "samples", "cpu_ns", "cpu_percent", "share"}, podFields...)

func triggersTable(rows []api.TriggerRow) table {
	t := table{header: []string{"ID", "PROGRAM", "WORKLOAD", "CONTEXT", "SAMPLES", "CPU%", "SHARE"}, fields: triggerFields}
	for _, r := range rows {
		id := strconv.FormatUint(uint64(r.ProgID), 10)
		t.rows = append(t.rows, []string{id, r.ProgName, r.Workload, r.Context, strconv.FormatInt(r.Samples, 10), fmtPercent(&r.CPUPercent), fmtShare(r.Share)})
		t.raw = append(t.raw, append([]string{id, r.ProgName, r.Workload, r.Context, r.Cgroup, r.Unit, r.Container, strings.Join(r.Devices, ";"),
			strconv.FormatInt(r.Samples, 10), strconv.FormatInt(r.CPUNs, 10), strconv.FormatFloat(r.CPUPercent, 'f', -1, 64), strconv.FormatFloat(r.Share, 'f', -1, 64)}, podCells(r.Pod)...))
	}
	return t
}

func fmtShare(v float64) string { return strconv.FormatFloat(100*v, 'f', 0, 64) + "%" }

// workloadRow is one workload and what it triggers across every program:
// `bpfperf owners --triggered`.
type workloadRow struct {
	Workload   string   `json:"workload"`
	Context    string   `json:"context"`
	Cgroup     string   `json:"cgroup,omitempty"`
	Unit       string   `json:"unit,omitempty"`
	Container  string   `json:"container,omitempty"`
	Pod        *api.Pod `json:"k8s,omitempty"`
	Programs   []string `json:"programs"` // "name (id)", costliest first
	Samples    int64    `json:"samples"`
	CPUNs      int64    `json:"cpu_ns"`
	CPUPercent float64  `json:"cpu_percent"`
}

// byWorkload adds trigger rows up by workload, costliest first.
func byWorkload(rows []api.TriggerRow) []workloadRow {
	at := map[string]int{}
	var out []workloadRow
	for _, r := range rows {
		k := r.Workload + "\x00" + r.Context
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, workloadRow{Workload: r.Workload, Context: r.Context, Cgroup: r.Cgroup, Unit: r.Unit, Container: r.Container, Pod: r.Pod})
		}
		w := &out[i]
		w.Programs = append(w.Programs, r.ProgName+" ("+strconv.FormatUint(uint64(r.ProgID), 10)+")")
		w.Samples += r.Samples
		w.CPUNs += r.CPUNs
		w.CPUPercent += r.CPUPercent
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CPUNs > out[j].CPUNs })
	return out
}

func workloadsTable(rows []workloadRow) table {
	t := table{header: []string{"WORKLOAD", "CONTEXT", "PROGS", "SAMPLES", "CPU%", "PROGRAMS"},
		fields: append([]string{"workload", "context", "cgroup", "unit", "container", "programs", "samples", "cpu_ns", "cpu_percent"}, podFields...)}
	for _, r := range rows {
		n := strconv.Itoa(len(r.Programs))
		t.rows = append(t.rows, []string{r.Workload, r.Context, n, strconv.FormatInt(r.Samples, 10), fmtPercent(&r.CPUPercent), strings.Join(r.Programs, ", ")})
		t.raw = append(t.raw, append([]string{r.Workload, r.Context, r.Cgroup, r.Unit, r.Container, strings.Join(r.Programs, ";"),
			strconv.FormatInt(r.Samples, 10), strconv.FormatInt(r.CPUNs, 10), strconv.FormatFloat(r.CPUPercent, 'f', -1, 64)}, podCells(r.Pod)...))
	}
	return t
}

// triggeredLine is show's "triggered by" field: the costliest few
// workloads with their share of the program's sampled CPU.
func triggeredLine(t api.Triggers, err error) string {
	if err != nil {
		return "- (" + err.Error() + ")"
	}
	const top = 3
	var parts []string
	for i, r := range t.Rows {
		if i == top {
			parts = append(parts, fmt.Sprintf("%d more (bpfperf triggers %d)", len(t.Rows)-top, r.ProgID))
			break
		}
		parts = append(parts, r.Workload+" "+fmtShare(r.Share))
	}
	return strings.Join(parts, "; ")
}
