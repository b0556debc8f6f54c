package top

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/api"
)

// ErrUnknownColumn is returned for a --sort name no column has.
var ErrUnknownColumn = errors.New("unknown sort column")

// Column is one column of the view: how to print a cell, how to compare
// rows, and whether it is shown only when some row has a value.
type Column struct {
	Key   string // the --sort name
	Field string // the JSON and CSV name
	Title string
	Width int // 0: takes the rest of the line
	Right bool
	// Optional columns (profiling, counters) are shown only when some row
	// has a value.
	Optional bool
	// Asc sorts low to high first (ids); other numbers start with the
	// highest, text with A.
	Asc  bool
	num  func(*Row) (float64, bool)
	text func(*Row) string
	fmt  func(float64, bool) string
}

// Cell prints the column's value for r.
func (c *Column) Cell(r *Row) string {
	if c.text != nil {
		return c.text(r)
	}
	return c.fmt(c.num(r))
}

// Raw prints the value for scripts: a plain number, empty when absent.
func (c *Column) Raw(r *Row) string {
	if c.text != nil {
		return c.text(r)
	}
	v, ok := c.num(r)
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Columns lists every column in display order.
var Columns = []*Column{
	{Key: "id", Field: "id", Asc: true, Title: "ID", Width: 7, Right: true, num: func(r *Row) (float64, bool) { return float64(r.ID), true }, fmt: fmtInt},
	{Key: "type", Field: "type", Title: "TYPE", Width: 13, text: func(r *Row) string { return r.Type }},
	{Key: "name", Field: "name", Title: "NAME", Width: 16, text: func(r *Row) string { return r.Name }},
	{Key: "runs", Field: "runs_per_sec", Title: "RUNS/S", Width: 7, Right: true, num: (*Row).RunsPerSec, fmt: FmtRate},
	{Key: "avg", Field: "avg_ns_per_run", Title: "AVG/RUN", Width: 9, Right: true, num: (*Row).AvgNs, fmt: FmtNs},
	{Key: "avgload", Field: "avg_ns_per_run_since_load", Title: "AVG/LOAD", Width: 9, Right: true, num: (*Row).AvgNsSinceLoad, fmt: FmtNs},
	{Key: "cpu", Field: "cpu_percent", Title: "CPU%", Width: 7, Right: true, num: (*Row).CPUPercent, fmt: FmtPercent},
	{Key: "sampled", Field: "sampled_cpu_percent", Title: "SMPL%", Width: 7, Right: true, Optional: true, num: func(r *Row) (float64, bool) { return fallback(r.SampledCPUPercent) }, fmt: FmtPercent},
	{Key: "cycles", Field: "cycles_per_run", Title: "CYC/RUN", Width: 7, Right: true, Optional: true, num: func(r *Row) (float64, bool) { return fallback(r.CyclesPerRun) }, fmt: FmtFloat},
	{Key: "ipc", Field: "ipc", Title: "IPC", Width: 5, Right: true, Optional: true, num: func(r *Row) (float64, bool) { return fallback(r.IPC) }, fmt: FmtFloat},
	{Key: "maps", Field: "map_bytes", Title: "MAPS", Width: 9, Right: true, Optional: true, num: func(r *Row) (float64, bool) {
		if r.MapBytes == nil || *r.MapBytes == 0 {
			return 0, false // no maps: "-", and no column where no program has any
		}
		return float64(*r.MapBytes), true
	}, fmt: fmtBytes},
	{Key: "owner", Field: "pids", Title: "OWNER", Width: 18, text: ownerCell},
	{Key: "attach", Field: "attach", Title: "ATTACH", text: attachCell},
}

func fmtInt(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// ownerCell is the first owner as comm/pid, with "+N" for the others.
func ownerCell(r *Row) string {
	if len(r.Owners) == 0 {
		return "-"
	}
	s := ownerName(r.Owners[0])
	if n := len(r.Owners) - 1; n > 0 {
		s += " +" + strconv.Itoa(n)
	}
	return s
}

// ownerName is comm/pid, or pin:PATH for a pin no process holds.
func ownerName(o api.Owner) string {
	if pin := o.PinOnly(); pin != "" {
		return "pin:" + pin
	}
	return o.Comm + "/" + strconv.Itoa(o.PID)
}

// attachCell lists attach points as "type target".
func attachCell(r *Row) string {
	if len(r.Attach) == 0 {
		return "-"
	}
	parts := make([]string, len(r.Attach))
	for i, a := range r.Attach {
		parts[i] = strings.TrimSpace(a.Type + " " + a.NetnsTarget())
	}
	return strings.Join(parts, ", ")
}

// ColumnByKey finds a column by its --sort name.
func ColumnByKey(key string) (*Column, error) {
	for _, c := range Columns {
		if c.Key == key {
			return c, nil
		}
	}
	keys := make([]string, len(Columns))
	for i, c := range Columns {
		keys[i] = c.Key
	}
	return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownColumn, key, strings.Join(keys, ", "))
}

// Visible returns the columns to show for rows: optional ones only when
// some row has a value.
func Visible(rows []*Row) []*Column {
	out := make([]*Column, 0, len(Columns))
	for _, c := range Columns {
		if c.Optional && !slices.ContainsFunc(rows, func(r *Row) bool { _, ok := c.num(r); return ok }) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Sort orders rows by col, highest first for numbers (lowest for ids) and
// A to Z for text, or the other way round with reverse. Rows without a
// value go last either way; ties fall back to the program id so the order
// is stable between refreshes. Each row's value is computed once.
func Sort(rows []*Row, col *Column, reverse bool) {
	keys := make([]sortKey, len(rows))
	for i, r := range rows {
		k := sortKey{row: r, ok: true}
		if col.text != nil {
			k.text = strings.ToLower(col.text(r))
		} else {
			k.num, k.ok = col.num(r)
		}
		keys[i] = k
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if a.ok != b.ok {
			if a.ok {
				return -1
			}
			return 1
		}
		c := cmp.Compare(a.text, b.text)
		if col.text == nil {
			c = cmp.Compare(b.num, a.num)
			if col.Asc {
				c = -c
			}
		}
		if reverse {
			c = -c
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.row.ID, b.row.ID)
	})
	for i, k := range keys {
		rows[i] = k.row
	}
}

type sortKey struct {
	row  *Row
	num  float64
	ok   bool
	text string
}

// Match reports whether r passes filter: a case-insensitive substring of
// the name, type or an owner's comm (an empty filter passes everything).
func Match(r *Row, filter string) bool {
	if filter == "" {
		return true
	}
	f := strings.ToLower(filter)
	if strings.Contains(strings.ToLower(r.Name), f) || strings.Contains(r.Type, f) {
		return true
	}
	for _, o := range r.Owners {
		if strings.Contains(strings.ToLower(o.Comm), f) {
			return true
		}
	}
	return false
}

// Filter returns the rows that match filter, in a new slice.
func Filter(rows []*Row, filter string) []*Row {
	out := make([]*Row, 0, len(rows))
	for _, r := range rows {
		if Match(r, filter) {
			out = append(out, r)
		}
	}
	return out
}

// fmtBytes prints a byte count in binary units.
func fmtBytes(v float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case v >= 1<<30:
		return strconv.FormatFloat(v/(1<<30), 'f', 1, 64) + "G"
	case v >= 1<<20:
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + "M"
	case v >= 1<<10:
		return strconv.FormatFloat(v/(1<<10), 'f', 1, 64) + "K"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + "B"
}
