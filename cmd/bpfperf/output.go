package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
)

// outputFlag is the -o flag every listing takes.
var outputFlag = &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table, json or csv"}

// table is a listing as text cells: humans get units in the table, scripts
// get plain numbers in CSV (and the typed document in JSON).
type table struct {
	header []string   // column titles for people
	fields []string   // CSV column names, snake_case like the JSON
	rows   [][]string // for table output
	raw    [][]string // for CSV; nil means use rows
}

// render writes v as JSON or t as a table or CSV, as -o says.
func render(c *cli.Context, w io.Writer, v any, t table) error {
	switch c.String("output") {
	case "json":
		return writeJSON(w, v)
	case "csv":
		cw := csv.NewWriter(w)
		rows := t.raw
		if rows == nil {
			rows = t.rows
		}
		cw.Write(t.fields)
		cw.WriteAll(rows)
		return cw.Error()
	case "table":
		return renderTable(w, t)
	default:
		return checkOutput(c) // says what is wrong with -o
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func renderTable(w io.Writer, t table) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// checkOutput validates -o of a listing before any work is done.
func checkOutput(c *cli.Context) error { return checkFormat(c, "table", "json", "csv") }

// checkFormat validates -o against the formats a command writes.
func checkFormat(c *cli.Context, formats ...string) error {
	f := c.String("output")
	if slices.Contains(formats, f) {
		return nil
	}
	last := len(formats) - 1
	return fmt.Errorf("-o %q: want %s or %s", f, strings.Join(formats[:last], ", "), formats[last])
}

// isTerminal says whether f is a terminal, for output meant for people only.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Human units.

func fmtCount(v uint64) string { return strconv.FormatUint(v, 10) }

func fmtRate(f *float64) string {
	if f == nil {
		return "-"
	}
	return siUnit(*f, "")
}

func fmtNs(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmtDurationNs(*f)
}

func fmtDurationNs(ns float64) string {
	switch {
	case ns >= 1e9:
		return strconv.FormatFloat(ns/1e9, 'f', 2, 64) + " s"
	case ns >= 1e6:
		return strconv.FormatFloat(ns/1e6, 'f', 2, 64) + " ms"
	case ns >= 1e3:
		return strconv.FormatFloat(ns/1e3, 'f', 2, 64) + " µs"
	default:
		return strconv.FormatFloat(ns, 'f', 0, 64) + " ns"
	}
}

func fmtPercent(f *float64) string {
	if f == nil {
		return "-"
	}
	if *f != 0 && math.Abs(*f) < 0.01 {
		return "<0.01%"
	}
	return strconv.FormatFloat(*f, 'f', 2, 64) + "%"
}

func siUnit(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + "G" + unit
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M" + unit
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 2, 64) + "k" + unit
	default:
		return strconv.FormatFloat(v, 'f', 1, 64) + unit
	}
}

func fmtBytes(v int64) string {
	switch {
	case v >= 1<<30:
		return strconv.FormatFloat(float64(v)/(1<<30), 'f', 2, 64) + " GiB"
	case v >= 1<<20:
		return strconv.FormatFloat(float64(v)/(1<<20), 'f', 2, 64) + " MiB"
	case v >= 1<<10:
		return strconv.FormatFloat(float64(v)/(1<<10), 'f', 1, 64) + " KiB"
	default:
		return strconv.FormatInt(v, 10) + " B"
	}
}

// podFields are the CSV columns of a row's Kubernetes pod, appended after
// the columns a listing had before pods had names (scripts that read
// columns by position keep theirs): the JSON's "k8s" object, flattened
// (a listing's own "container" column is the container's ids).
var podFields = []string{"k8s_namespace", "k8s_pod", "k8s_pod_uid", "k8s_container", "k8s_container_id", "k8s_workload"}

// podCells are p's podFields, empty for none.
func podCells(p *api.Pod) []string {
	if p == nil {
		return make([]string, len(podFields))
	}
	return []string{p.Namespace, p.Pod, p.UID, p.Container, p.ContainerID, p.Workload}
}

// raw formats an optional number for CSV: empty when absent.
func raw(f *float64) string {
	if f == nil {
		return ""
	}
	return strconv.FormatFloat(*f, 'f', -1, 64)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}
