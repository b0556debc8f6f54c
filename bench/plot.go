package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// series is one line of a plot.
type series struct {
	name string
	x, y []float64
}

// chart is one panel: lines over a shared x axis.
type chart struct {
	title, xlabel, ylabel string
	logX                  bool
	xticks                []float64
	xtickLabel            func(float64) string
	lines                 []series
}

// Plot writes tailcalls.svg (median ns vs chain length) and maps.svg (one
// panel per operation and key pattern: median ns vs map size, one line per
// map type) for the tests present in rep. It returns the files written.
func Plot(rep *Report, dir string) ([]string, error) {
	var written []string
	tail := tailChart(rep)
	maps := mapCharts(rep)
	if len(tail.lines) == 0 && len(maps) == 0 {
		return nil, fmt.Errorf("%w: the report has no tail-call or map results to plot", ErrBadConfig)
	}
	if len(tail.lines) > 0 {
		p := filepath.Join(dir, "tailcalls.svg")
		if err := writeSVGFile(p, []chart{tail}, 1); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	if len(maps) > 0 {
		p := filepath.Join(dir, "maps.svg")
		if err := writeSVGFile(p, maps, len(KeyPatterns)); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

func ok(r Result) bool { return r.Error == "" && r.Skipped == "" && r.Summary.N > 0 }

func tailChart(rep *Report) chart {
	s := series{name: "median"}
	for _, r := range rep.Results {
		if r.Group != "tailcall" || !ok(r) || r.Name == "tailcall/limit" {
			continue
		}
		n, err := strconv.Atoi(r.Labels["chain"])
		if err != nil {
			continue
		}
		s.x = append(s.x, float64(n))
		s.y = append(s.y, r.Summary.Median)
	}
	c := chart{title: "tail calls: ns per run vs chain length (kernel limit " + strconv.Itoa(MaxTailCalls) + ")",
		xlabel: "tail calls in the chain", ylabel: "ns/run (median)",
		xtickLabel: func(v float64) string { return strconv.Itoa(int(v)) }}
	for i := 0; i <= MaxTailCalls; i += 4 {
		c.xticks = append(c.xticks, float64(i))
	}
	if len(s.x) > 0 {
		sortSeries(&s)
		c.lines = []series{s}
	}
	return c
}

func mapCharts(rep *Report) []chart {
	type key struct{ op, keys string }
	lines := map[key]map[string]*series{}
	for _, r := range rep.Results {
		if r.Group != "maps" || !ok(r) || r.Labels["size"] == "" {
			continue
		}
		size, err := strconv.Atoi(r.Labels["size"])
		if err != nil {
			continue
		}
		k := key{r.Labels["op"], r.Labels["keys"]}
		if lines[k] == nil {
			lines[k] = map[string]*series{}
		}
		s := lines[k][r.Labels["map"]]
		if s == nil {
			s = &series{name: r.Labels["map"]}
			lines[k][r.Labels["map"]] = s
		}
		s.x = append(s.x, float64(size))
		s.y = append(s.y, r.Summary.Median)
	}
	var charts []chart
	for _, op := range allOps {
		for _, pat := range KeyPatterns {
			m := lines[key{op, pat}]
			if len(m) == 0 {
				continue
			}
			c := chart{title: fmt.Sprintf("%s, %s keys", op, pat), xlabel: "map entries", ylabel: "ns/run (median)",
				logX: true, xtickLabel: func(v float64) string { return sizeName(int(v)) }}
			for _, sz := range MapSizes {
				c.xticks = append(c.xticks, float64(sz))
			}
			for _, name := range sortedKeys(m) {
				s := *m[name]
				sortSeries(&s)
				c.lines = append(c.lines, s)
			}
			charts = append(charts, c)
		}
	}
	return charts
}

func sortSeries(s *series) {
	idx := make([]int, len(s.x))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return s.x[idx[a]] < s.x[idx[b]] })
	x, y := make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		x[i], y[i] = s.x[j], s.y[j]
	}
	s.x, s.y = x, y
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

func writeSVGFile(path string, charts []chart, cols int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeSVG(f, charts, cols); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// writeSVG lays charts out in a grid, cols wide. Plain SVG, no scripts.
func writeSVG(w io.Writer, charts []chart, cols int) error {
	const pw, ph = 560.0, 360.0
	rows := (len(charts) + cols - 1) / cols
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", pw*float64(cols), ph*float64(rows))
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	for i, c := range charts {
		ox, oy := pw*float64(i%cols), ph*float64(i/cols)
		panel(&b, c, ox, oy, pw, ph)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func panel(b *strings.Builder, c chart, ox, oy, pw, ph float64) {
	const left, right, top, bottom = 60.0, 130.0, 30.0, 45.0
	x0, x1 := ox+left, ox+pw-right
	y0, y1 := oy+ph-bottom, oy+top
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range c.lines {
		for i := range s.x {
			xmin, xmax = math.Min(xmin, s.x[i]), math.Max(xmax, s.x[i])
			ymax = math.Max(ymax, s.y[i])
		}
	}
	for _, t := range c.xticks {
		xmin, xmax = math.Min(xmin, t), math.Max(xmax, t)
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax = niceCeil(ymax)
	tx := func(v float64) float64 {
		if c.logX {
			v, xmin, xmax := math.Log10(math.Max(v, 1)), math.Log10(math.Max(xmin, 1)), math.Log10(math.Max(xmax, 1))
			if xmax == xmin {
				return x0
			}
			return x0 + (v-xmin)/(xmax-xmin)*(x1-x0)
		}
		if xmax == xmin {
			return x0
		}
		return x0 + (v-xmin)/(xmax-xmin)*(x1-x0)
	}
	ty := func(v float64) float64 { return y0 - v/ymax*(y0-y1) }

	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", x0, oy+18, html.EscapeString(c.title))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, y0, x1, y0)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, y0, x0, y1)
	for _, t := range c.xticks {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			tx(t), y0, tx(t), y0+4, tx(t), y0+16, html.EscapeString(c.xtickLabel(t)))
	}
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			x0, ty(v), x1, ty(v), x0-5, ty(v)+4, strconv.FormatFloat(v, 'f', -1, 64))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, y0+34, html.EscapeString(c.xlabel))
	fmt.Fprintf(b, `<text transform="translate(%.1f,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", ox+16, (y0+y1)/2, html.EscapeString(c.ylabel))
	for i, s := range c.lines {
		color := palette[i%len(palette)]
		var pts []string
		for j := range s.x {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", tx(s.x[j]), ty(s.y[j])))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		for j := range s.x {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s %g: %.1f ns</title></circle>`+"\n",
				tx(s.x[j]), ty(s.y[j]), color, html.EscapeString(s.name), s.x[j], s.y[j])
		}
		ly := y1 + 14*float64(i)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			x1+10, ly, x1+24, ly, color, x1+28, ly+4, html.EscapeString(s.name))
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
