package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func mapsCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "maps",
		Usage: "list BPF maps: memory, entries and fill level, the programs using them, their owners",
		Flags: []cli.Flag{
			outputFlag,
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list maps that are gone but still in the store"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return fmt.Errorf("maps: unexpected argument %q (did you mean: bpfperf maps show %s?)", c.Args().First(), c.Args().First())
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			m, err := client.Maps(c.Bool("all"))
			if err != nil {
				return err
			}
			return render(c, os.Stdout, m, mapsTable(m.Maps))
		},
		Subcommands: []*cli.Command{mapsShowCommand(dial)},
	}
}

func mapsTable(maps []api.Map) table {
	t := table{
		header: []string{"ID", "TYPE", "NAME", "MAX", "ENTRIES", "FILL", "MEMORY", "PROGS", "OWNER"},
		fields: []string{"id", "type", "name", "max_entries", "entries", "fill_percent", "bytes_memlock", "programs", "owner", "counted", "present"},
	}
	for _, m := range maps {
		id := strconv.FormatUint(uint64(m.ID), 10)
		progs := joinIDs(m.Programs)
		mem := fmtBytes(int64(m.MemoryBytes))
		if !m.Present {
			mem = "gone " + fmtTime(m.GoneAt)
		}
		t.rows = append(t.rows, []string{id, m.Type, m.Name, strconv.FormatUint(uint64(m.MaxEntries), 10), fmtEntries(m), fmtPercent(m.FillPercent), mem, dash(progs), dash(ownersText(m.Owners))})
		t.raw = append(t.raw, []string{id, m.Type, m.Name, strconv.FormatUint(uint64(m.MaxEntries), 10), rawInt(m.Entries), raw(m.FillPercent), strconv.FormatUint(m.MemoryBytes, 10), progs, ownersText(m.Owners), m.Counted, strconv.FormatBool(m.Present)})
	}
	return t
}

// fmtEntries is a map's entries, "-" where the type has no fill level and
// ">=" before a walk that stopped at its budget.
func fmtEntries(m api.Map) string {
	switch {
	case m.Entries == nil:
		return "-"
	case m.Partial:
		return ">=" + strconv.FormatInt(*m.Entries, 10)
	}
	return strconv.FormatInt(*m.Entries, 10)
}

func rawInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinIDs(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}

// ownersText names owners as comm(pid), with the pod, unit or container
// where the cgroup names one.
func ownersText(owners []api.Owner) string {
	s := make([]string, 0, len(owners))
	for _, o := range owners {
		if pin := o.PinOnly(); pin != "" {
			s = append(s, "pin:"+pin)
			continue
		}
		where := o.Container
		switch {
		case o.Pod != nil:
			where = o.Pod.String()
		case where == "":
			where = o.Unit
		}
		if where != "" {
			s = append(s, fmt.Sprintf("%s(%d) %s", o.Comm, o.PID, where))
		} else {
			s = append(s, fmt.Sprintf("%s(%d)", o.Comm, o.PID))
		}
	}
	return strings.Join(s, ", ")
}

func mapsShowCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one map and its memory and entries over time",
		ArgsUsage: "MAP (an id, or a name when unique)",
		Flags:     slices.Concat([]cli.Flag{outputFlag}, timeRangeFlags("1h")),
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			ref, err := oneArg(c, "MAP")
			if err != nil {
				return err
			}
			d, err := mapDetail(c, dial, ref)
			if err != nil {
				return err
			}
			state := "present, read " + fmtTime(d.ReadAt)
			if !d.Present {
				state = "gone " + fmtTime(d.GoneAt)
			}
			counted := d.Counted
			if d.Partial {
				counted += " (stopped at the walk budget: a lower bound)"
			}
			kv := [][2]string{
				{"id", strconv.FormatUint(uint64(d.ID), 10)},
				{"name", d.Name},
				{"type", d.Type},
				{"state", state},
				{"flags", fmt.Sprintf("0x%x", d.Flags)},
				{"bytes_key", strconv.FormatUint(uint64(d.KeySize), 10)},
				{"bytes_value", strconv.FormatUint(uint64(d.ValueSize), 10)},
				{"max_entries", strconv.FormatUint(uint64(d.MaxEntries), 10)},
				{"entries", fmtEntries(d.Map)},
				{"fill", fmtPercent(d.FillPercent)},
				{"counted", dash(counted)},
				{"bytes_memlock", strconv.FormatUint(d.MemoryBytes, 10)},
				{"programs", dash(joinIDs(d.Programs))},
				{"pids", dash(ownersText(d.Owners))},
				{"readings", strconv.Itoa(len(d.Points))},
			}
			if c.String("output") == "json" {
				return writeJSON(os.Stdout, d)
			}
			if c.String("output") == "table" {
				for _, p := range kv {
					fmt.Printf("%-14s %s\n", p[0]+":", p[1])
				}
				if len(d.Points) > 0 {
					fmt.Println()
					return renderTable(os.Stdout, mapHistoryTable(d))
				}
				return nil
			}
			return render(c, os.Stdout, d, mapHistoryTable(d))
		},
	}
}

// mapDetail fetches a map with the --since/--until of c.
func mapDetail(c *cli.Context, dial clientFactory, ref string) (api.MapDetail, error) {
	client, since, until, err := dialRange(c, dial)
	if err != nil {
		return api.MapDetail{}, err
	}
	return client.Map(ref, since, until)
}

func mapHistoryTable(d api.MapDetail) table {
	t := table{
		header: []string{"TIME", "ENTRIES", "FILL", "MEMORY"},
		fields: []string{"time", "entries", "fill_percent", "bytes_memlock"},
	}
	for _, p := range d.Points {
		entries := "-"
		if p.Entries != nil {
			entries = strconv.FormatInt(*p.Entries, 10)
		}
		t.rows = append(t.rows, []string{p.Time.Local().Format("2006-01-02 15:04:05.000"), entries, fmtPercent(p.FillPercent), fmtBytes(int64(p.MemoryBytes))})
		t.raw = append(t.raw, []string{p.Time.UTC().Format(time.RFC3339Nano), rawInt(p.Entries), raw(p.FillPercent), strconv.FormatUint(p.MemoryBytes, 10)})
	}
	return t
}
