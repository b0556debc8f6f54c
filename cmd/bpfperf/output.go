package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
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
	switch f := c.String("output"); f {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
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
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		return tw.Flush()
	default:
		return fmt.Errorf("-o %q: want table, json or csv", f)
	}
}

// checkOutput validates -o before any work is done.
func checkOutput(c *cli.Context) error {
	switch f := c.String("output"); f {
	case "table", "json", "csv":
		return nil
	default:
		return fmt.Errorf("-o %q: want table, json or csv", f)
	}
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
