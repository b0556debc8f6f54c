package plots

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Drawing with gonum/plot: a figure is a grid of panels, each with its
// legend in a strip to its right, where it hides no line.

// line is one series of a panel; style picks its colour (and dashes once
// the colours run out).
type line struct {
	name  string
	style int
	xys   plotter.XYs
}

// panel is one chart: lines over shared axes.
type panel struct {
	title, xlabel, ylabel string
	logX                  bool
	xticks                []plot.Tick
	// xmin, xmax widen the x axis to the ticks; ymax, if above the data,
	// makes panels of a row share their y axis.
	xmin, xmax, ymax float64
	lines            []line
}

const (
	panelWidth  = 380 // pt (about 500 px), the legend aside
	panelHeight = 270 // pt
	legendGap   = 8   // pt between a plot and its legend
	glyphRadius = 2   // pt
)

// palette is matplotlib's tab10: distinct, and readable on white.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// dashes tell apart lines whose colours repeat (more than ten reports).
var dashes = [][]vg.Length{nil, {6, 3}, {2, 2}, {6, 2, 2, 2}}

func lineStyle(i int) draw.LineStyle {
	return draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.5), Dashes: dashes[i/len(palette)%len(dashes)]}
}

// sans sets every text of p in Liberation Sans (gonum's default is the
// serif face), as charts usually are.
func sans(p *plot.Plot) {
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font.Variant = "Sans"
		ax.Tick.Label.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Variant = "Sans"
	p.Legend.TextStyle.Font.Variant = "Sans"
}

// plot builds the gonum plot of a panel and its legend, drawn apart.
func (pn *panel) plot() (*plot.Plot, *plot.Legend, error) {
	p := plot.New()
	p.BackgroundColor = nil // the figure is filled once, legends included
	sans(p)
	p.Title.Text = pn.title
	p.X.Label.Text, p.Y.Label.Text = pn.xlabel, pn.ylabel
	if pn.logX {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = plot.ConstantTicks(pn.xticks)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	leg := p.Legend
	leg.Top, leg.Left = true, true
	for _, l := range pn.lines {
		lp, sp, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", l.name, err)
		}
		lp.LineStyle = lineStyle(l.style)
		sp.GlyphStyle = draw.GlyphStyle{Color: lp.LineStyle.Color, Radius: glyphRadius, Shape: draw.CircleGlyph{}}
		p.Add(lp, sp)
		leg.Add(l.name, lp, sp)
	}
	// After Add, which fits the axes to the data: ns start at 0, and the
	// axes take in the ticks and the row's shared maximum.
	p.X.Min, p.X.Max = min(p.X.Min, pn.xmin), max(p.X.Max, pn.xmax)
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max, pn.ymax)
	return p, &leg, nil
}

// writeFigure draws panels in a grid (nil leaves a cell empty) into an
// SVG file.
func writeFigure(path string, grid [][]*panel) error {
	rows, cols := len(grid), len(grid[0])
	plots := make([][]*plot.Plot, rows)
	legends := make([][]*plot.Legend, rows)
	var legendWidth vg.Length
	for r, row := range grid {
		plots[r], legends[r] = make([]*plot.Plot, cols), make([]*plot.Legend, cols)
		for c, pn := range row {
			if pn == nil {
				continue
			}
			p, leg, err := pn.plot()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			plots[r][c], legends[r][c] = p, leg
			legendWidth = max(legendWidth, leg.Rectangle(draw.Canvas{}).Size().X)
		}
	}
	// Widths are measured in Liberation Sans; a viewer without it
	// substitutes a face up to a fifth wider (DejaVu Sans).
	legendWidth *= 1.2
	strip := legendWidth + 2*legendGap
	canvas := vgsvg.New(vg.Length(cols)*(panelWidth+strip), vg.Length(rows)*panelHeight)
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: strip, PadRight: strip, PadTop: 4, PadY: 12, PadLeft: 4, PadBottom: 4}
	for r, row := range plot.Align(plots, tiles, dc) {
		for c, tc := range row {
			p := plots[r][c]
			if p == nil {
				continue
			}
			p.Draw(tc)
			data := p.DataCanvas(tc)
			legends[r][c].Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: tc.Max.X + legendGap, Y: data.Min.Y},
				Max: vg.Point{X: tc.Max.X + legendGap + legendWidth, Y: data.Max.Y},
			}})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
