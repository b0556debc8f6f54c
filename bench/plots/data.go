package plots

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot/plotter"

	"github.com/bpfperf/bpfperf/bench"
)

// The figures bench plot draws come from these results only: medians of
// the tail-call chains and of the map experiments that ran.

// mapPanel is one panel of maps.svg: an operation under a key pattern.
type mapPanel struct{ op, keys string }

// plottable says whether a result has a median to draw.
func plottable(r bench.Result) bool {
	return r.Error == "" && r.Skipped == "" && r.Summary.N > 0 && !math.IsNaN(r.Summary.Median) && !math.IsInf(r.Summary.Median, 0)
}

// tailPoints returns median ns/run against chain length, sorted by length.
// tailcall/limit is left out: it checks the limit, its length is not a
// point of the curve.
func tailPoints(rep *bench.Report) plotter.XYs {
	var xys plotter.XYs
	for _, r := range rep.Results {
		if r.Group != "tailcall" || r.Name == "tailcall/limit" || !plottable(r) {
			continue
		}
		n, err := strconv.Atoi(r.Labels["chain"])
		if err != nil || n < 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: float64(n), Y: r.Summary.Median})
	}
	sortXYs(xys)
	return xys
}

// mapPoints returns, per panel and map type, median ns/run against map
// size, sorted by size. Only the suite's operations and key patterns have
// a panel; sizes below 1 cannot sit on a log axis.
func mapPoints(rep *bench.Report) map[mapPanel]map[string]plotter.XYs {
	out := map[mapPanel]map[string]plotter.XYs{}
	for _, r := range rep.Results {
		if r.Group != "maps" || !plottable(r) {
			continue
		}
		size, err := strconv.Atoi(r.Labels["size"])
		k := mapPanel{r.Labels["op"], r.Labels["keys"]}
		if err != nil || size < 1 || !slices.Contains(bench.MapOps, k.op) || !slices.Contains(bench.KeyPatterns, k.keys) {
			continue
		}
		if out[k] == nil {
			out[k] = map[string]plotter.XYs{}
		}
		out[k][r.Labels["map"]] = append(out[k][r.Labels["map"]], plotter.XY{X: float64(size), Y: r.Summary.Median})
	}
	for _, lines := range out {
		for _, xys := range lines {
			sortXYs(xys)
		}
	}
	return out
}

func sortXYs(xys plotter.XYs) {
	slices.SortStableFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
}

// mapTypes are the suite's map types in its order.
var mapTypes = bench.MapTypes()

// mapTypeIndex orders map types as the suite does, so that a type keeps
// its colour in every panel; types the suite does not know come after.
func mapTypeIndex(name string) int {
	if i := slices.Index(mapTypes, name); i >= 0 {
		return i
	}
	return len(mapTypes)
}
