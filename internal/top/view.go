package top

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/bpfperf/bpfperf/api"
)

// Styles decorate whole lines. Plain ones (tests, NO_COLOR is handled by
// the renderer's profile) return the text as is.
type Styles struct {
	Title, Bar, Selected, Error, Dim, Chart func(string) string
}

// PlainStyles leave text alone.
func PlainStyles() Styles {
	id := func(s string) string { return s }
	return Styles{id, id, id, id, id, id}
}

// NewStyles builds styles for r's colour profile: with NO_COLOR or output
// that is not a terminal the profile is ASCII and no colour is written.
func NewStyles(r *lipgloss.Renderer) Styles {
	f := func(s lipgloss.Style) func(string) string { return func(t string) string { return s.Render(t) } }
	return Styles{
		Title:    f(r.NewStyle().Bold(true)),
		Bar:      f(r.NewStyle().Reverse(true)),
		Selected: f(r.NewStyle().Reverse(true).Bold(true)),
		Error:    f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))),
		Dim:      f(r.NewStyle().Faint(true)),
		Chart:    f(r.NewStyle().Foreground(lipgloss.Color("6"))),
	}
}

func (m *Model) styles() Styles {
	if m.cfg.Styles.Title == nil {
		return PlainStyles()
	}
	return m.cfg.Styles
}

// View draws the screen.
func (m *Model) View() string {
	if m.width == 0 || m.height == 0 {
		return "" // bubbletea sends the size first
	}
	if m.width < MinWidth || m.height < MinHeight {
		return tooSmall(m.width, m.height)
	}
	st := m.styles()
	lines := make([]string, 0, m.height)
	lines = append(lines, fit(m.header(), m.width), m.statusLine(st))
	switch {
	case m.help:
		lines = append(lines, m.helpLines()...)
	case m.detail != nil:
		lines = append(lines, m.detailLines(st)...)
	default:
		lines = append(lines, m.tableLines(st)...)
	}
	for len(lines) < m.height-1 {
		lines = append(lines, "")
	}
	lines = append(lines[:m.height-1], m.footer(st))
	return strings.Join(lines, "\n")
}

// tooSmall is the one message drawn in a terminal too small for the view,
// wrapped at a space when even it does not fit.
func tooSmall(w, h int) string {
	msg := fmt.Sprintf("terminal too small (need %dx%d, have %dx%d)", MinWidth, MinHeight, w, h)
	if w <= 0 || len(msg) <= w {
		return msg
	}
	return "terminal too small\n" + fmt.Sprintf("(need %dx%d, have %dx%d)", MinWidth, MinHeight, w, h)
}

// header is the first line: where we are and what BPF costs.
func (m *Model) header() string {
	// The daemon says which host it watches (the socket may be forwarded);
	// until its status arrives, the CLI's own host stands in.
	host, kernel := m.cfg.Host, m.cfg.Kernel
	if m.haveStatus && m.status.Hostname != "" {
		host, kernel = m.status.Hostname, m.status.KernelRelease
	}
	parts := []string{"bpfperf top", "host " + host, "kernel " + kernel}
	if m.haveStatus {
		parts = append(parts, "stats "+m.status.StatsMode)
	}
	parts = append(parts, "BPF CPU "+FmtPercent(m.totalCPU()))
	if m.haveStatus {
		parts = append(parts, fmt.Sprintf("bpfperfd %s CPU %s", FmtPercent(m.status.CPUPercent, true), FmtBytes(m.status.RSSBytes)))
	}
	return strings.Join(parts, " · ")
}

// totalCPU sums the CPU % of every program, shown or not.
func (m *Model) totalCPU() (float64, bool) {
	total, any := 0.0, false
	for _, r := range m.table.rows {
		if v, ok := r.CPUPercent(); ok {
			total += v
			any = true
		}
	}
	return total, any
}

// statusLine says what the view shows, or that the daemon went away.
func (m *Model) statusLine(st Styles) string {
	if m.err != nil {
		msg := fmt.Sprintf("disconnected, retrying every %v (for %v): %v", m.interval, m.now().Sub(m.errSince).Truncate(time.Second), m.err)
		return st.Error(fit(msg, m.width))
	}
	if m.samples == 0 {
		return fit("connecting to bpfperfd…", m.width)
	}
	n := len(m.table.rows)
	parts := []string{strconv.Itoa(n) + " programs"}
	if len(m.view) != n {
		parts[0] += fmt.Sprintf(" (%d shown)", len(m.view))
	}
	arrow := "↓"
	if m.reverse {
		arrow = "↑"
	}
	parts = append(parts, "sort "+m.sortKey+" "+arrow, "every "+m.interval.String())
	if m.filter != "" || m.typing {
		parts = append(parts, fmt.Sprintf("filter %q", m.filter))
	}
	if m.paused {
		parts = append(parts, "PAUSED")
	}
	return fit(strings.Join(parts, " · "), m.width)
}

func (m *Model) footer(st Styles) string {
	if m.typing {
		return fit("filter: "+m.filter+"▏ (enter keeps, esc clears)", m.width)
	}
	var keys string
	switch {
	case m.help:
		keys = "any key closes help"
	case m.detail != nil:
		keys = "esc back  w/W window  +/- interval  p pause  ? help  q quit"
	default:
		keys = "q quit  ? help  / filter  </> sort  r reverse  p pause  +/- interval  enter chart"
	}
	return st.Dim(fit(keys, m.width))
}

// tableLines are the column titles and the visible rows.
func (m *Model) tableLines(st Styles) []string {
	cols := m.cols
	if cols == nil {
		cols = Visible(nil)
	}
	widths := m.widths(cols)
	var b strings.Builder
	b.WriteString(" ")
	for i, c := range cols {
		title := c.Title
		if c.Key == m.sortKey {
			if m.reverse {
				title += "▲"
			} else {
				title += "▼"
			}
		}
		cell(&b, title, widths[i], c.Right, i == len(cols)-1)
	}
	lines := []string{st.Bar(fit(b.String(), m.width))}
	h := m.bodyHeight()
	for i := m.offset; i < len(m.view) && i < m.offset+h; i++ {
		b.Reset()
		if i == m.cursor {
			b.WriteString(">")
		} else {
			b.WriteString(" ")
		}
		r := m.view[i]
		for j, c := range cols {
			cell(&b, c.Cell(r), widths[j], c.Right, j == len(cols)-1)
		}
		line := fit(b.String(), m.width)
		if i == m.cursor {
			line = st.Selected(line)
		}
		lines = append(lines, line)
	}
	if len(m.view) == 0 && m.samples > 0 {
		if m.filter != "" {
			lines = append(lines, fmt.Sprintf(" no program matches %q", m.filter))
		} else {
			lines = append(lines, " no BPF programs loaded")
		}
	}
	return lines
}

// widths gives each column its width; the flexible one takes the rest.
func (m *Model) widths(cols []*Column) []int {
	w := make([]int, len(cols))
	used := 1
	for i, c := range cols {
		w[i] = c.Width
		used += c.Width + 1
	}
	for i, c := range cols {
		if c.Width == 0 {
			w[i] = max(m.width-used, 6)
		}
	}
	return w
}

// cell writes s padded or cut to w, then a space unless last.
func cell(b *strings.Builder, s string, w int, right, last bool) {
	n := width(s)
	if n > w {
		s, n = ansi.Truncate(s, w, "…"), w
	}
	pad := strings.Repeat(" ", w-n)
	if right {
		b.WriteString(pad)
		b.WriteString(s)
	} else {
		b.WriteString(s)
		if !last {
			b.WriteString(pad)
		}
	}
	if !last {
		b.WriteByte(' ')
	}
}

// width is the printed width of s, fast for ASCII.
func width(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// fit cuts s to w columns.
func fit(s string, w int) string {
	if width(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

var helpText = []string{
	"Keys",
	"  q, ctrl+c      quit",
	"  ?, h           this help (any key closes it)",
	"  /              filter by name, type or owner comm as you type",
	"                 (enter keeps the filter, esc clears it)",
	"  < > or s       sort by the previous / next column",
	"  1..9           sort by the Nth column (again: reverse)",
	"  r              reverse the sort",
	"  p, space       pause / resume",
	"  + -            refresh slower / faster",
	"  up down j k    select; pgup pgdown home end",
	"  enter          charts and metadata of the selected program",
	"  w W            (charts) longer / shorter window: 5m 15m 1h 6h 1d 7d",
	"  esc            back to the list",
	"",
	"Rates are top's own, between the daemon's two latest readings.",
	"CPU% is run time over wall time, relative to one CPU (like bpftop).",
	"AVG/LOAD is the mean run time since the program was loaded.",
}

func (m *Model) helpLines() []string {
	out := make([]string, len(helpText))
	for i, l := range helpText {
		out[i] = fit(l, m.width)
	}
	return out
}

// detailLines are the selected program's metadata and charts.
func (m *Model) detailLines(st Styles) []string {
	d := m.detail
	r := &d.row
	window := Windows[d.window]
	avail := m.height - 3 // header, status, footer
	lines := []string{st.Title(fit(fmt.Sprintf("%s  id %d · %s · tag %s · window %s", r.Name, r.ID, r.Type, r.Tag, fmtWindow(window)), m.width))}
	if _, loaded := m.table.rows[d.key]; !loaded && m.samples > 0 {
		lines[0] += st.Error(" · unloaded")
	}
	meta := m.metaLines(d)
	// Charts need a title and at least one row each, plus the axis.
	chartRows := func(metaN int) int { return (avail-1-metaN-1)/3 - 1 }
	for len(meta) > 0 && chartRows(len(meta)) < 2 {
		meta = meta[:len(meta)-1]
	}
	for _, l := range meta {
		lines = append(lines, fit(l, m.width))
	}
	rows := max(chartRows(len(meta)), 1)
	if d.err != nil {
		lines = append(lines, st.Error(fit("history: "+d.err.Error(), m.width)))
	} else if d.hist == nil && d.fetching {
		lines = append(lines, "loading history…")
	}
	if d.hist == nil {
		return lines
	}
	gutter := 9
	cw := m.width - gutter - 1
	series := []struct {
		title string
		val   func(p *api.HistoryPoint) *float64
		now   func() (float64, bool)
		fmt   func(float64, bool) string
	}{
		{"CPU %", func(p *api.HistoryPoint) *float64 { return p.CPUPercent }, r.CPUPercent, FmtPercent},
		{"runs/s", func(p *api.HistoryPoint) *float64 { return p.RunsPerSec }, r.RunsPerSec, FmtRate},
		{"avg ns/run", func(p *api.HistoryPoint) *float64 { return p.AvgNsPerRun }, r.AvgNs, FmtNs},
	}
	for _, s := range series {
		pts := make([]Point, len(d.hist))
		any := false
		for i := range d.hist {
			v := math.NaN()
			if f := s.val(&d.hist[i]); f != nil {
				v, any = *f, true
			}
			pts[i] = Point{Time: d.hist[i].Time, Value: v}
		}
		chart, top := Chart(pts, d.since, d.until, cw, rows)
		// "now" is the live rate; the chart and its max come from the store.
		lines = append(lines, fit(fmt.Sprintf("%s  now %s  max %s", s.title, s.fmt(s.now()), s.fmt(top, any)), m.width))
		for i, c := range chart {
			label := ""
			switch i {
			case 0:
				label = s.fmt(top, any)
			case len(chart) - 1:
				label = "0"
			}
			lines = append(lines, fmt.Sprintf("%*s ", gutter, label)+st.Chart(c))
		}
	}
	lines = append(lines, fmt.Sprintf("%*s ", gutter, "")+Axis(m.marks(d), d.since, d.until, cw, "-"+fmtWindow(window)))
	return lines
}

// marks are the reloads (R) and new versions (V) in the window.
func (m *Model) marks(d *detail) []Mark {
	var out []Mark
	for _, p := range d.hist {
		if p.Reload {
			out = append(out, Mark{Time: p.Time, Char: 'R'})
		}
	}
	for _, e := range d.events {
		if e.Kind == "new_version" {
			out = append(out, Mark{Time: e.Time, Char: 'V'})
		}
	}
	return out
}

// metaLines describe the program, most useful first (the last ones go
// when the terminal is short).
func (m *Model) metaLines(d *detail) []string {
	r := &d.row
	now := []string{
		"runs/s " + FmtRate(r.RunsPerSec()),
		"avg " + FmtNs(r.AvgNs()),
		"cpu " + FmtPercent(r.CPUPercent()),
		"avg since load " + FmtNs(r.AvgNsSinceLoad()),
		"run_cnt " + strconv.FormatUint(r.RunCnt, 10),
		"recursion_misses " + strconv.FormatUint(r.RecursionMisses, 10),
	}
	owners := make([]string, len(r.Owners))
	for i, o := range r.Owners {
		owners[i] = ownerName(o)
	}
	loaded := "-"
	if !r.LoadedAt.IsZero() {
		loaded = r.LoadedAt.Local().Format("2006-01-02 15:04:05") + " (" + fmtAge(m.now().Sub(r.LoadedAt)) + " ago)"
	}
	out := []string{
		strings.Join(now, " · "),
		"loaded " + loaded + " · owners " + orDash(strings.Join(owners, ", ")) + " · attach " + attachCell(r),
	}
	if d.meta != nil {
		mt := d.meta.Meta
		maps := make([]string, len(mt.MapIDs))
		for i, id := range mt.MapIDs {
			maps[i] = strconv.FormatUint(uint64(id), 10)
		}
		out = append(out, fmt.Sprintf("xlated %d B · jited %d B · memlock %s · verified %d insns · maps %s · btf %d · uid %d",
			mt.BytesXlated, mt.BytesJited, FmtBytes(int64(mt.BytesMemlock)), mt.VerifiedInsns, orDash(strings.Join(maps, ",")), mt.BTFID, mt.UID))
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtWindow(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
}

func fmtAge(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d >= time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d >= time.Minute:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	default:
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
}
