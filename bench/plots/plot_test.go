package plots

import (
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/bench"
)

// The plots are drawn from fixture reports (the suite's tests with made-up
// medians) and read back as XML: what gonum emits for a line is one path
// with a vertex per point, plus a filled circle per point, plus one more
// line and circle for the legend entry, drawn after the plot.

// plotReport is a full report of the suite's tail-call and map tests on
// kernel, with medians that grow with chain length and map size, and a
// baseline result that is not plotted.
func plotReport(kernel string) *bench.Report {
	rep := &bench.Report{Fingerprint: bench.Fingerprint{Kernel: kernel}}
	for _, t := range bench.Suite() {
		var median float64
		switch t.Group {
		case "tailcall":
			n, _ := strconv.Atoi(t.Labels["chain"])
			median = 40 + 12*float64(n)
		case "maps":
			size, _ := strconv.Atoi(t.Labels["size"])
			median = float64(10+3*mapTypeIndex(t.Labels["map"])) * (1 + math.Log2(float64(size+1))/4)
		case "baseline":
			median = 50
		default:
			continue
		}
		rep.Results = append(rep.Results, bench.Result{Test: t, Summary: bench.Summary{N: 10, Median: median}})
	}
	return rep
}

// without marks the named results of rep as failed (Error) or skipped.
func without(rep *bench.Report, failed, skipped string) *bench.Report {
	for i := range rep.Results {
		switch rep.Results[i].Name {
		case failed:
			rep.Results[i].Error = "boom"
		case skipped:
			rep.Results[i].Skipped = "no test run"
		}
	}
	return rep
}

type svgPath struct{ d, style string }

type svgText struct {
	x, y float64
	text string
}

type svgDoc struct {
	paths []svgPath
	texts []svgText
}

// readSVG parses an SVG file as XML and collects its paths and texts.
func readSVG(t *testing.T, path string) svgDoc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc svgDoc
	dec := xml.NewDecoder(f)
	var text *svgText
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch tok.Name.Local {
			case "path":
				doc.paths = append(doc.paths, svgPath{attr["d"], attr["style"]})
			case "text":
				x, _ := strconv.ParseFloat(attr["x"], 64)
				y, _ := strconv.ParseFloat(attr["y"], 64)
				text = &svgText{x: x, y: -y} // texts are drawn flipped: scale(1, -1)
			}
		case xml.CharData:
			if text != nil {
				text.text += string(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				doc.texts = append(doc.texts, *text)
				text = nil
			}
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", path, root)
	}
	return doc
}

// count says how many texts read exactly s.
func (d svgDoc) count(s string) int {
	n := 0
	for _, t := range d.texts {
		if t.text == s {
			n++
		}
	}
	return n
}

func (d svgDoc) text(s string) (svgText, bool) {
	for _, t := range d.texts {
		if t.text == s {
			return t, true
		}
	}
	return svgText{}, false
}

// row returns the texts on the line of the text s, left to right: the
// tick labels of an x axis.
func (d svgDoc) row(s string) []string {
	at, ok := d.text(s)
	if !ok {
		return nil
	}
	var row []svgText
	for _, t := range d.texts {
		if t.y == at.y {
			row = append(row, t)
		}
	}
	slices.SortFunc(row, func(a, b svgText) int { return cmp.Compare(a.x, b.x) })
	var out []string
	for _, t := range row {
		out = append(out, t.text)
	}
	return out
}

func hexColor(i int) string {
	c := palette[i%len(palette)]
	return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)
}

var pathPoint = regexp.MustCompile(`[ML](-?[0-9.e+-]+),(-?[0-9.e+-]+)`)

// glyphs returns the centres of the filled circles of a colour, in the
// order drawn. A circle's path starts at its rightmost point.
func (d svgDoc) glyphs(color string) [][2]float64 {
	var out [][2]float64
	for _, p := range d.paths {
		if !strings.Contains(p.d, "A") || !strings.Contains(p.style, "fill:"+color) {
			continue
		}
		m := pathPoint.FindStringSubmatch(p.d)
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		out = append(out, [2]float64{x - glyphRadius, y})
	}
	return out
}

// lines returns the vertex count of each stroked line of a colour.
func (d svgDoc) lines(color string) []int {
	var out []int
	for _, p := range d.paths {
		if !strings.Contains(p.d, "A") && strings.Contains(p.style, "stroke:"+color) {
			out = append(out, len(pathPoint.FindAllString(p.d, -1)))
		}
	}
	return out
}

func TestPlotTwoKernels(t *testing.T) {
	newer := plotReport("6.18.44-fc")
	older := without(plotReport("6.1.0-test"), "tailcall/chain=5", "maps/hash/lookup/size=64K/keys=zipf")
	for i := range older.Results {
		older.Results[i].Summary.Median *= 1.3
	}
	dir := t.TempDir()
	files, err := Write([]Run{{newer, "new.json"}, {older, "old.json"}}, dir)
	if err != nil || !slices.Equal(files, []string{filepath.Join(dir, "tailcalls.svg"), filepath.Join(dir, "maps.svg")}) {
		t.Fatalf("plot: %v, %v", files, err)
	}

	tail := readSVG(t, files[0])
	for _, s := range []string{"tail calls: ns per run vs chain length (kernel limit 33)", "tail calls in the chain", "ns/run (median)"} {
		if tail.count(s) != 1 {
			t.Errorf("tailcalls.svg has %q %d times, want once", s, tail.count(s))
		}
	}
	if ticks := tail.row("32"); !slices.Equal(ticks, []string{"0", "4", "8", "12", "16", "20", "24", "28", "32"}) {
		t.Errorf("tailcalls.svg x ticks %q", ticks)
	}
	// A line per report: all 34 chain lengths, and 33 where chain=5
	// failed; the legend names each by kernel, beside its own colour.
	for i, c := range []struct {
		kernel string
		points int
	}{{"6.18.44-fc", bench.MaxTailCalls + 1}, {"6.1.0-test", bench.MaxTailCalls}} {
		color := hexColor(i)
		glyphs := tail.glyphs(color)
		if len(glyphs) != c.points+1 || !slices.Equal(tail.lines(color), []int{c.points, 2}) {
			t.Errorf("%s (%s): %d circles, lines of %v points; want %d+1 circles, lines of [%d 2]", c.kernel, color, len(glyphs), tail.lines(color), c.points, c.points)
			continue
		}
		label, ok := tail.text(c.kernel)
		if !ok || tail.count(c.kernel) != 1 {
			t.Errorf("legend entry %q: %d times", c.kernel, tail.count(c.kernel))
			continue
		}
		if key := glyphs[len(glyphs)-1]; math.Abs(key[1]-label.y) > 8 || key[0] > label.x {
			t.Errorf("legend %q at %v, its circle at %v: not beside it", c.kernel, label, key)
		}
		// A linear axis: chain lengths evenly spaced.
		step := glyphs[1][0] - glyphs[0][0]
		if last := glyphs[c.points-1][0] - glyphs[0][0]; step <= 0 || math.Abs(last-step*float64(bench.MaxTailCalls)) > 0.1 {
			t.Errorf("%s: x of chain 0, 1, %d: %v %v %v: not linear", c.kernel, bench.MaxTailCalls, glyphs[0][0], glyphs[1][0], glyphs[c.points-1][0])
		}
	}

	maps := readSVG(t, files[1])
	for _, op := range bench.MapOps {
		for _, keys := range bench.KeyPatterns {
			for _, k := range []string{"6.18.44-fc", "6.1.0-test"} {
				if title := fmt.Sprintf("%s, %s keys: %s", op, keys, k); maps.count(title) != 1 {
					t.Errorf("maps.svg: panel %q %d times, want once", title, maps.count(title))
				}
			}
		}
	}
	// hash: 4 ops x 2 key patterns x 2 reports, 4 sizes each, one
	// skipped; array: 3 ops.
	for _, c := range []struct {
		kind          string
		lines, points int
	}{{"hash", 16, 16*4 - 1}, {"array", 12, 12 * 4}, {"hash_of_maps", 4, 4 * 4}} {
		color := hexColor(mapTypeIndex(c.kind))
		var points, legends int
		for _, n := range maps.lines(color) {
			if n == 2 {
				legends++
			} else {
				points += n
			}
		}
		if legends != c.lines || points != c.points || len(maps.glyphs(color)) != c.points+c.lines || maps.count(c.kind) != c.lines {
			t.Errorf("maps.svg %s: %d legend entries, %d points, %d circles, %d names; want %d, %d, %d, %d",
				c.kind, legends, points, len(maps.glyphs(color)), maps.count(c.kind), c.lines, c.points, c.points+c.lines, c.lines)
		}
	}
}

// TestPlotLogAxis: map sizes sit on a log axis, 1, 1K, 64K and 1M at 0,
// 10/20, 16/20 and 1 of its width.
func TestPlotLogAxis(t *testing.T) {
	rep := &bench.Report{Fingerprint: bench.Fingerprint{Kernel: "6.18.44-fc"}}
	for _, size := range bench.MapSizes {
		rep.Results = append(rep.Results, bench.Result{
			Test:    bench.Test{Group: "maps", Labels: map[string]string{"map": "hash", "op": "lookup", "size": strconv.Itoa(size), "keys": "uniform"}},
			Summary: bench.Summary{N: 1, Median: 20},
		})
	}
	dir := t.TempDir()
	files, err := Write([]Run{{rep, "one.json"}}, dir)
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "maps.svg" {
		t.Fatalf("plot: %v, %v", files, err)
	}
	doc := readSVG(t, files[0])
	for _, s := range []string{"lookup, uniform keys", "map entries", "ns/run (median)", "hash"} {
		if doc.count(s) != 1 {
			t.Errorf("maps.svg has %q %d times, want once", s, doc.count(s))
		}
	}
	if ticks := doc.row("1M"); !slices.Equal(ticks, []string{"1", "1K", "64K", "1M"}) {
		t.Errorf("maps.svg x ticks %q", ticks)
	}
	g := doc.glyphs(hexColor(mapTypeIndex("hash")))
	if len(g) != len(bench.MapSizes)+1 {
		t.Fatalf("%d circles, want %d and the legend's", len(g), len(bench.MapSizes))
	}
	width := g[3][0] - g[0][0]
	for i, want := range []float64{0, 0.5, 0.8, 1} {
		if at := (g[i][0] - g[0][0]) / width; math.Abs(at-want) > 0.002 {
			t.Errorf("size %s at %.4f of the axis, want %.4f (log scale)", bench.SizeName(bench.MapSizes[i]), at, want)
		}
	}
}

// TestPlotOneReport: one report draws as before, its line named by its
// kernel and map panels titled without it.
func TestPlotOneReport(t *testing.T) {
	dir := t.TempDir()
	files, err := Write([]Run{{plotReport("6.18.44-fc"), "run.json"}}, dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("plot: %v, %v", files, err)
	}
	tail := readSVG(t, files[0])
	if tail.count("6.18.44-fc") != 1 || len(tail.glyphs(hexColor(0))) != bench.MaxTailCalls+2 || len(tail.glyphs(hexColor(1))) != 0 {
		t.Errorf("tailcalls.svg: legend %d, circles %d and %d", tail.count("6.18.44-fc"), len(tail.glyphs(hexColor(0))), len(tail.glyphs(hexColor(1))))
	}
	maps := readSVG(t, files[1])
	if maps.count("delete_insert, zipf keys") != 1 || maps.count("delete_insert, zipf keys: 6.18.44-fc") != 0 {
		t.Errorf("maps.svg panel titles: %v", maps.texts)
	}
}

func TestPlotNames(t *testing.T) {
	rep := func(kernel string) *bench.Report {
		return &bench.Report{Fingerprint: bench.Fingerprint{Kernel: kernel}}
	}
	for _, c := range []struct {
		runs []Run
		want []string
	}{
		{[]Run{{rep("6.18"), "a.json"}, {rep("6.1"), "b.json"}}, []string{"6.18", "6.1"}},
		{[]Run{{rep("6.18"), "a.json"}, {rep("6.18"), "run 2 (pr-1)"}, {rep("6.1"), "c.json"}}, []string{"6.18, a.json", "6.18, run 2 (pr-1)", "6.1"}},
		{[]Run{{rep(""), "a.json"}, {rep("6.1"), "b.json"}}, []string{"a.json", "6.1"}},
		{[]Run{{rep("6.18"), "a.json"}, {rep("6.18"), "a.json"}}, []string{"6.18, a.json #1", "6.18, a.json #2"}},
		{[]Run{{rep(""), ""}}, []string{"report 1"}},
	} {
		if got := plotNames(c.runs); !slices.Equal(got, c.want) {
			t.Errorf("plotNames = %q, want %q", got, c.want)
		}
	}
}

// TestPlotNothing: no report, or one with nothing to draw, is refused
// before any file is written, naming the report.
func TestPlotNothing(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(nil, dir); !errors.Is(err, ErrNothingToPlot) {
		t.Errorf("no reports: %v", err)
	}
	base := &bench.Report{Results: []bench.Result{{Test: bench.Test{Name: "baseline/xdp", Group: "baseline"}, Summary: bench.Summary{N: 1, Median: 9}}}}
	failed := without(&bench.Report{Results: []bench.Result{{Test: bench.Test{Name: "tailcall/chain=0", Group: "tailcall", Labels: map[string]string{"chain": "0"}}, Summary: bench.Summary{N: 1, Median: 9}}}}, "tailcall/chain=0", "")
	for _, rep := range []*bench.Report{base, failed} {
		_, err := Write([]Run{{plotReport("6.18"), "good.json"}, {rep, "base.json"}}, dir)
		if !errors.Is(err, ErrNothingToPlot) || !strings.Contains(err.Error(), "base.json has no tail-call or map results") {
			t.Errorf("report with nothing to plot: %v", err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused plots wrote %d files", len(ents))
	}
}

// BenchmarkPlot times bench plot's drawing of full reports (the suite's
// 34 chain lengths and 224 map results each) and reports the sizes of
// the files written. `make bench` runs it once.
func BenchmarkPlot(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("reports=%d", n), func(b *testing.B) {
			var runs []Run
			for i := range n {
				runs = append(runs, Run{plotReport(fmt.Sprintf("6.%d.0", 18-i)), fmt.Sprintf("r%d.json", i)})
			}
			dir := b.TempDir()
			for b.Loop() {
				if _, err := Write(runs, dir); err != nil {
					b.Fatal(err)
				}
			}
			for _, f := range []string{"tailcalls.svg", "maps.svg"} {
				fi, err := os.Stat(filepath.Join(dir, f))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(fi.Size())/1024, "KiB-"+f)
			}
		})
	}
}
