package top

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Point is one value of a chart at a time; NaN is "no value".
type Point struct {
	Time  time.Time
	Value float64
}

// Chart draws points between since and until as a filled braille area,
// width cells wide and height cells tall (2x4 dots per cell), scaled from 0
// to the largest value. Times without a value stay empty, so a gap reads
// differently from zero (zero draws the bottom dot). It returns height
// lines and the largest value.
func Chart(points []Point, since, until time.Time, width, height int) ([]string, float64) {
	if width < 1 || height < 1 {
		return nil, 0
	}
	dotsX, dotsY := 2*width, 4*height
	// The latest value in each dot column.
	col := make([]float64, dotsX)
	for i := range col {
		col[i] = math.NaN()
	}
	span := until.Sub(since)
	if span <= 0 {
		return blank(width, height), 0
	}
	xOf := func(t time.Time) int { return int(float64(t.Sub(since)) / float64(span) * float64(dotsX-1)) }
	// A value is the rate over the time since the point before it, so it
	// fills the columns back to that point, unless the two are far apart
	// (the daemon was down): then only its own column.
	gap := 3 * medianStep(points)
	top := 0.0
	prevX, prevT := -1, time.Time{}
	for _, p := range points {
		if p.Time.Before(since) || p.Time.After(until) {
			continue
		}
		x := xOf(p.Time)
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			prevX, prevT = x, p.Time
			continue
		}
		from := x
		if prevX >= 0 && p.Time.Sub(prevT) <= gap {
			from = prevX + 1
		}
		for i := min(from, x); i <= x; i++ {
			col[i] = p.Value
		}
		top = max(top, p.Value)
		prevX, prevT = x, p.Time
	}
	cells := make([]rune, width*height)
	for i := range cells {
		cells[i] = 0x2800
	}
	for x, v := range col {
		if math.IsNaN(v) {
			continue
		}
		level := 0 // dots from the bottom, at least one for a present value
		if top > 0 {
			level = int(math.Round(max(v, 0) / top * float64(dotsY-1)))
		}
		for y := 0; y <= level; y++ {
			row := dotsY - 1 - y
			cells[(row/4)*width+x/2] |= brailleDot(x%2, row%4)
		}
	}
	lines := make([]string, height)
	for i, c := range cells {
		if c == 0x2800 {
			cells[i] = ' ' // an empty braille cell shows dots in some fonts
		}
	}
	for r := range height {
		lines[r] = string(cells[r*width : (r+1)*width])
	}
	return lines, top
}

func blank(width, height int) []string {
	out := make([]string, height)
	for i := range out {
		out[i] = strings.Repeat(" ", width)
	}
	return out
}

// medianStep is the median time between consecutive points (the chart's
// resolution); 0 with fewer than two points.
func medianStep(points []Point) time.Duration {
	if len(points) < 2 {
		return 0
	}
	steps := make([]time.Duration, 0, len(points)-1)
	for i := 1; i < len(points); i++ {
		steps = append(steps, points[i].Time.Sub(points[i-1].Time))
	}
	slices.Sort(steps)
	return steps[len(steps)/2]
}

// brailleDot is the bit of the dot at column x (0, 1) and row y (0..3,
// top to bottom) of a braille cell.
func brailleDot(x, y int) rune {
	if y == 3 {
		return rune(0x40 << x)
	}
	return rune(1 << (y + 3*x))
}

// Mark is an event drawn on the time axis under the charts.
type Mark struct {
	Time time.Time
	Char rune // 'R' reload, 'V' new version
}

// Axis is the line under the charts: the window's start at the left, "now"
// at the right, and marks at their times (a later mark wins a cell).
func Axis(marks []Mark, since, until time.Time, width int, left string) string {
	cells := []rune(strings.Repeat("─", width))
	span := until.Sub(since)
	label := func(at int, s string) {
		for i, r := range s {
			if at+i >= 0 && at+i < width {
				cells[at+i] = r
			}
		}
	}
	label(0, left)
	label(width-3, "now")
	for _, m := range marks {
		if span <= 0 || m.Time.Before(since) || m.Time.After(until) {
			continue
		}
		x := int(float64(m.Time.Sub(since)) / float64(span) * float64(width-1))
		cells[x] = m.Char
	}
	return string(cells)
}
