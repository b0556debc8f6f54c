// Package plots draws bench reports as SVG charts with gonum/plot: the
// tail-call chain-length curve and the map panels of bpfperf bench plot.
// It is apart from bench so that only the CLI links the plotting library
// and its fonts (about 8 MB), not the daemon.
package plots

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/bpfperf/bpfperf/bench"
)

// ErrNothingToPlot: no report was given, or one without tail-call or map
// results.
var ErrNothingToPlot = errors.New("nothing to plot")

// Run is one report to plot. Source says where it came from (a file
// name, or a stored run and its label); the legend uses it when the
// kernel release alone does not tell the reports apart.
type Run struct {
	Report *bench.Report
	Source string
}

const nsAxis = "ns/run (median)"

// Write writes tailcalls.svg (median ns/run against tail-call chain length,
// one line per report) and maps.svg (median ns/run against map size, a
// line per map type; a row of panels per operation, a panel per key
// pattern and report, the panels of a row on one y scale) into dir. Lines
// are named by kernel release, so two kernels or two runs compare on one
// chart. Every report must have something to plot. It returns the files
// written.
func Write(runs []Run, dir string) ([]string, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: no reports given", ErrNothingToPlot)
	}
	names := plotNames(runs)
	tails := make([]plotter.XYs, len(runs))
	mapLines := make([]map[mapPanel]map[string]plotter.XYs, len(runs))
	for i, r := range runs {
		tails[i], mapLines[i] = tailPoints(r.Report), mapPoints(r.Report)
		if len(tails[i]) == 0 && len(mapLines[i]) == 0 {
			return nil, fmt.Errorf("%w: %s has no tail-call or map results that ran", ErrNothingToPlot, cmp.Or(r.Source, names[i]))
		}
	}
	var written []string
	if tail := tailPanel(names, tails); len(tail.lines) > 0 {
		p := filepath.Join(dir, "tailcalls.svg")
		if err := writeFigure(p, [][]*panel{{tail}}); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	if grid := mapGrid(names, mapLines); len(grid) > 0 {
		p := filepath.Join(dir, "maps.svg")
		if err := writeFigure(p, grid); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

// plotNames names each report by its kernel release. Where kernels tie
// (two runs on one kernel) or one is unknown, the source is added; where
// even that ties (a file named twice), the position.
func plotNames(runs []Run) []string {
	names := make([]string, len(runs))
	count := map[string]int{}
	for i, r := range runs {
		names[i] = r.Report.Fingerprint.Kernel
		count[names[i]]++
	}
	for i, r := range runs {
		src := r.Source
		if src == "" {
			src = "report " + strconv.Itoa(i+1)
		}
		switch {
		case names[i] == "":
			names[i] = src
		case count[names[i]] > 1:
			names[i] += ", " + src
		}
	}
	seen := map[string]int{}
	for i, n := range names {
		if seen[n]++; seen[n] > 1 || slices.Index(names[i+1:], n) >= 0 {
			names[i] = fmt.Sprintf("%s #%d", n, i+1)
		}
	}
	return names
}

// tailPanel has one line per report that has tail-call results.
func tailPanel(names []string, tails []plotter.XYs) *panel {
	pn := &panel{
		title:  fmt.Sprintf("tail calls: ns per run vs chain length (kernel limit %d)", bench.MaxTailCalls),
		xlabel: "tail calls in the chain", ylabel: nsAxis,
		xmin: 0, xmax: bench.MaxTailCalls,
	}
	for i := 0; i <= bench.MaxTailCalls; i += 4 {
		pn.xticks = append(pn.xticks, plot.Tick{Value: float64(i), Label: strconv.Itoa(i)})
	}
	for i, xys := range tails {
		if len(xys) > 0 {
			pn.lines = append(pn.lines, line{name: names[i], style: i, xys: xys})
		}
	}
	return pn
}

// mapGrid lays out maps.svg: a row per operation; per key pattern, a
// column per report with map results, side by side. Panels of a row share
// their y scale so that neighbours compare by eye.
func mapGrid(names []string, mapLines []map[mapPanel]map[string]plotter.XYs) [][]*panel {
	var reps []int
	for i, m := range mapLines {
		if len(m) > 0 {
			reps = append(reps, i)
		}
	}
	var grid [][]*panel
	for _, op := range bench.MapOps {
		row := make([]*panel, 0, len(bench.KeyPatterns)*len(reps))
		used, ymax := false, 0.0
		for _, keys := range bench.KeyPatterns {
			for _, i := range reps {
				lines := mapLines[i][mapPanel{op, keys}]
				if len(lines) == 0 {
					row = append(row, nil)
					continue
				}
				pn := mapPanelOf(op, keys, lines)
				if len(names) > 1 {
					pn.title += ": " + names[i]
				}
				for _, l := range pn.lines {
					for _, xy := range l.xys {
						ymax = max(ymax, xy.Y)
					}
				}
				row, used = append(row, pn), true
			}
		}
		if !used {
			continue
		}
		for _, pn := range row {
			if pn != nil {
				pn.ymax = ymax
			}
		}
		grid = append(grid, row)
	}
	return grid
}

// mapPanelOf draws one operation under one key pattern: a line per map
// type, coloured by the type's place in the suite.
func mapPanelOf(op, keys string, lines map[string]plotter.XYs) *panel {
	pn := &panel{
		title: fmt.Sprintf("%s, %s keys", op, keys), xlabel: "map entries", ylabel: nsAxis,
		logX: true, xmin: float64(bench.MapSizes[0]), xmax: float64(bench.MapSizes[len(bench.MapSizes)-1]),
	}
	for _, sz := range bench.MapSizes {
		pn.xticks = append(pn.xticks, plot.Tick{Value: float64(sz), Label: bench.SizeName(sz)})
	}
	unknown := len(mapTypes)
	for _, name := range sortedMapTypes(lines) {
		style := mapTypeIndex(name)
		if style == len(mapTypes) {
			style, unknown = unknown, unknown+1
		}
		pn.lines = append(pn.lines, line{name: name, style: style, xys: lines[name]})
	}
	return pn
}

// sortedMapTypes orders map types as the suite does, unknown ones last by
// name.
func sortedMapTypes(lines map[string]plotter.XYs) []string {
	names := slices.Sorted(maps.Keys(lines))
	slices.SortStableFunc(names, func(a, b string) int { return mapTypeIndex(a) - mapTypeIndex(b) })
	return names
}
