package top

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/bpfperf/bpfperf/api"
)

// fakeSource answers from fields; err makes every call fail.
type fakeSource struct {
	progs  []api.ProgRow
	status api.Status
	hist   api.History
	events []api.Event
	err    error
}

func (f *fakeSource) Status() (api.Status, error)       { return f.status, f.err }
func (f *fakeSource) Progs(bool) ([]api.ProgRow, error) { return f.progs, f.err }
func (f *fakeSource) ProgCounters() ([]api.ProgCounters, error) {
	return counterRows(f.progs), f.err
}
func (f *fakeSource) Show(string) (api.ProgDetail, error) { return api.ProgDetail{}, f.err }
func (f *fakeSource) History(string, time.Time, time.Time, time.Duration) (api.History, error) {
	return f.hist, f.err
}
func (f *fakeSource) Events(time.Time, time.Time, string) (api.Events, error) {
	return api.Events{Events: f.events}, f.err
}

// testModel is a model at 160x20 that has taken two readings one second
// apart of testRows.
func testModel(t testing.TB) *Model {
	m := New(&fakeSource{}, Config{Host: "h1", Kernel: "6.18.0", Interval: time.Second, Now: func() time.Time { return t0.Add(2 * time.Second) }})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 20})
	var first, second []api.ProgRow
	for _, r := range testRows() {
		p := r.ProgRow
		second = append(second, p)
		p.Counters, p.LastSample = api.Counters{}, t0
		first = append(first, p)
	}
	m.Update(sampleMsg{at: t0, progs: first, status: api.Status{StatsMode: "fd", CPUPercent: 0.4, RSSBytes: 20 << 20}})
	m.Update(sampleMsg{at: t0.Add(time.Second), progs: second, status: api.Status{StatsMode: "fd", CPUPercent: 0.4, RSSBytes: 20 << 20}})
	return m
}

func key(m *Model, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "backspace":
			msg = tea.KeyMsg{Type: tea.KeyBackspace}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		m.Update(msg)
	}
}

// order returns the program names in the order the screen shows them.
func order(screen string) []string {
	var out []string
	for _, l := range strings.Split(screen, "\n") {
		for _, n := range []string{"fw_ingress", "dns_snoop", "sched_probe", "tc_egress"} {
			if strings.Contains(l, " "+n+" ") {
				out = append(out, n)
			}
		}
	}
	return out
}

func TestViewTable(t *testing.T) {
	m := testModel(t)
	s := m.View()
	t.Log("\n" + s)
	lines := strings.Split(s, "\n")
	if len(lines) != 20 {
		t.Errorf("%d lines, want 20", len(lines))
	}
	for _, want := range []string{"host h1", "kernel 6.18.0", "stats fd", "BPF CPU 15.40%", "bpfperfd 0.40% CPU 20.0 MiB", "4 programs", "sort cpu ↓", "CPU%▼"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q", want)
		}
	}
	// tc_egress: 500k runs, 100 ms in one second.
	if !regexpLine(s, `^> *13 +sched_cls +tc_egress +500k +200 ns +200 ns +10\.00% +cilium-agent/1300 +-`) {
		t.Errorf("tc_egress row is wrong or not selected")
	}
	if !regexpLine(s, `^ +12 +tracepoint +sched_probe +0 +- +- +0\.00% +- +-`) {
		t.Errorf("idle sched_probe row is wrong")
	}
	for _, l := range lines {
		if width(l) > 160 {
			t.Errorf("line wider than the terminal: %q", l)
		}
	}
}

func TestKeysSortFilterPause(t *testing.T) {
	m := testModel(t)
	if got := order(m.View()); fmt.Sprint(got) != "[tc_egress fw_ingress dns_snoop sched_probe]" {
		t.Fatalf("cpu order %v", got)
	}
	key(m, "r")
	if got := order(m.View()); fmt.Sprint(got) != "[sched_probe dns_snoop fw_ingress tc_egress]" {
		t.Errorf("reversed order %v", got)
	}
	key(m, "3") // NAME is the third column
	if got := order(m.View()); fmt.Sprint(got) != "[dns_snoop fw_ingress sched_probe tc_egress]" || m.sortKey != "name" {
		t.Errorf("name order %v (sort %s)", got, m.sortKey)
	}
	key(m, ">") // next column: RUNS/S
	if m.sortKey != "runs" {
		t.Errorf("> moved sort to %s, want runs", m.sortKey)
	}
	key(m, "/", "c", "i", "l")
	s := m.View()
	if got := order(s); fmt.Sprint(got) != "[fw_ingress tc_egress]" || !strings.Contains(s, `filter "cil"`) || !strings.Contains(s, "(2 shown)") {
		t.Errorf("filter cil shows %v\n%s", got, s)
	}
	key(m, "backspace", "backspace", "backspace", "x", "d", "p")
	if got := order(m.View()); fmt.Sprint(got) != "[fw_ingress]" {
		t.Errorf("filter xdp shows %v", got)
	}
	key(m, "esc")
	if len(order(m.View())) != 4 || m.filter != "" {
		t.Errorf("esc did not clear the filter")
	}
	key(m, "p")
	if !strings.Contains(m.View(), "PAUSED") {
		t.Error("p does not pause")
	}
	_, cmd := m.Update(tickMsg{gen: m.gen})
	if m.fetching {
		t.Error("a paused view fetched")
	}
	_ = cmd
	key(m, "p", "+")
	if m.interval != 2*time.Second || !strings.Contains(m.View(), "every 2s") {
		t.Errorf("+ made the interval %v", m.interval)
	}
	key(m, "?")
	if !strings.Contains(m.View(), "filter by name, type or owner comm") {
		t.Error("? shows no help")
	}
	key(m, "x")
	if m.help {
		t.Error("a key does not close help")
	}
}

func TestSelectionFollowsProgram(t *testing.T) {
	m := testModel(t)
	key(m, "down") // fw_ingress
	key(m, "3")    // by name: fw_ingress is second
	if m.view[m.cursor].Name != "fw_ingress" {
		t.Errorf("selection moved to %s", m.view[m.cursor].Name)
	}
}

func TestTooSmall(t *testing.T) {
	m := testModel(t)
	m.Update(tea.WindowSizeMsg{Width: 50, Height: 8})
	if got := m.View(); got != "terminal too small (need 60x10, have 50x8)" {
		t.Errorf("small terminal shows %q", got)
	}
	m.Update(tea.WindowSizeMsg{Width: 30, Height: 8})
	for _, l := range strings.Split(m.View(), "\n") {
		if len(l) > 30 {
			t.Errorf("too-small message line wider than 30: %q", l)
		}
	}
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 10})
	if s := m.View(); !strings.Contains(s, "tc_egress") || len(strings.Split(s, "\n")) != 10 {
		t.Errorf("60x10 does not draw the table:\n%s", s)
	}
}

func TestDisconnected(t *testing.T) {
	m := testModel(t)
	m.Update(sampleMsg{at: t0.Add(1500 * time.Millisecond), err: fmt.Errorf("%w: connection refused", api.ErrNoDaemon)})
	s := m.View()
	if !strings.Contains(s, "disconnected, retrying every 1s (for 0s): no bpfperfd running") {
		t.Errorf("no disconnected state:\n%s", s)
	}
	if !strings.Contains(s, "tc_egress") {
		t.Error("the last rows should stay on screen while disconnected")
	}
	m.Update(sampleMsg{at: t0.Add(3 * time.Second), progs: []api.ProgRow{prog(13, "tc_egress", 600_000, 120_000_000, t0.Add(3*time.Second))}})
	if s := m.View(); strings.Contains(s, "disconnected") || !strings.Contains(s, "1 programs") {
		t.Errorf("did not recover:\n%s", s)
	}
}

func TestDetail(t *testing.T) {
	m := testModel(t)
	now := t0.Add(2 * time.Second)
	var hist []api.HistoryPoint
	// An hour of points a minute apart, reloaded halfway, 1% CPU then 3%.
	for i := 0; i <= 60; i++ {
		p := api.HistoryPoint{Time: now.Add(time.Duration(i-60) * time.Minute), ID: 13}
		cpu, runs, avg := 1.0, 1000.0, 10_000.0
		if i >= 30 {
			cpu, runs, avg = 3, 1500, 20_000
		}
		if i == 30 {
			p.Reload = true
		} else {
			p.Rates = api.Rates{CPUPercent: &cpu, RunsPerSec: &runs, AvgNsPerRun: &avg}
		}
		hist = append(hist, p)
	}
	src := m.src.(*fakeSource)
	src.hist = api.History{Points: hist}
	// Events are the program's by identity; "other" shares no identity
	// (nor id) with it and must not be marked.
	src.events = []api.Event{{Time: now.Add(-15 * time.Minute), Kind: "new_version", Name: "tc_egress", Identity: "sched_cls/tc_egress"},
		{Time: now.Add(-10 * time.Minute), Kind: "loaded", Name: "other", Identity: "sched_cls/other"}}
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	row := m.table.rows[keyOf(&m.view[0].ProgRow)]
	row.Owners = []api.Owner{{PID: 42, Comm: "tc"}}
	row.Identity, row.IdentityID = "sched_cls/tc_egress", "0ab1c2d3"
	m.refresh()
	key(m, "enter")
	if m.detail.window != 0 {
		t.Errorf("the first window is %v, want 5m", Windows[m.detail.window])
	}
	m.detail.window = 2 // 1h
	_, _ = m.Update(m.fetchDetail(true)())
	s := m.View()
	t.Log("\n" + s)
	for _, want := range []string{"tc_egress  id 13 · sched_cls", "window 1h", "CPU %  now 10.00%  max 3.00%", "runs/s  now 500k  max 1.50k", "avg ns/run  now 200 ns  max 20.0 µs", "owners tc/42", "-1h", "now"} {
		if !strings.Contains(s, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	axis := lastChartLine(s)
	r, v := strings.IndexRune(axis, 'R'), strings.IndexRune(axis, 'V')
	if r < 0 || v < 0 || v <= r {
		t.Errorf("axis should mark the reload (R) then the new version (V): %q", axis)
	}
	if !strings.ContainsAny(s, "⣿⣀") {
		t.Error("no chart drawn")
	}
	key(m, "w")
	if m.detail.window != 3 {
		t.Errorf("w: window %d", m.detail.window)
	}
	key(m, "esc")
	if m.detail != nil {
		t.Error("esc does not leave the detail view")
	}
}

func lastChartLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "now") && strings.Contains(lines[i], "─") {
			return lines[i]
		}
	}
	return ""
}

func TestOnceReport(t *testing.T) {
	var calls int
	src := &onceSource{fakeSource: fakeSource{status: api.Status{StatsMode: "fd", IntervalMs: 200}}}
	src.next = func() []api.ProgRow {
		calls++
		if calls == 1 {
			return []api.ProgRow{prog(1, "a", 100, 10_000, t0), prog(2, "b", 0, 0, t0)}
		}
		return []api.ProgRow{prog(1, "a", 300, 50_000, t0.Add(500*time.Millisecond)), prog(2, "b", 10, 1000, t0.Add(500*time.Millisecond))}
	}
	rep, err := Once(src, OnceOptions{Host: "h", Kernel: "k", Interval: 500 * time.Millisecond, Sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Programs) != 2 || rep.Programs[0].Name != "a" {
		t.Fatalf("programs %+v", rep.Programs)
	}
	a := rep.Programs[0]
	if *a.RunsPerSec != 400 || *a.AvgNsPerRun != 200 || *a.CPUPercent != 0.008 || a.PeriodMs != 500 || a.RunCnt != 300 {
		t.Errorf("a: runs/s %v avg %v cpu %v period %v", *a.RunsPerSec, *a.AvgNsPerRun, *a.CPUPercent, a.PeriodMs)
	}
	if *rep.BPFCPUPercent != 0.008+0.0002 {
		t.Errorf("total cpu %v", *rep.BPFCPUPercent)
	}
	header, fields, rows, raw := rep.Table()
	if header[0] != "ID" || fields[3] != "runs_per_sec" || rows[0][3] != "400" || raw[0][3] != "400" || raw[0][len(raw[0])-1] != "500" {
		t.Errorf("table %v %v %v %v", header, fields, rows, raw)
	}
	if _, err := Once(src, OnceOptions{Sort: "bogus"}); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("bad sort: %v", err)
	}
}

type onceSource struct {
	fakeSource
	next func() []api.ProgRow
}

func (o *onceSource) Progs(bool) ([]api.ProgRow, error) { return o.next(), nil }
func (o *onceSource) ProgCounters() ([]api.ProgCounters, error) {
	return counterRows(o.next()), nil
}

// counterRows is what the daemon answers for fields=counters.
func counterRows(rows []api.ProgRow) []api.ProgCounters {
	out := make([]api.ProgCounters, len(rows))
	for i, r := range rows {
		out[i] = api.ProgCounters{ID: r.ID, Tag: r.Tag, Counters: r.Counters, LastSampleMs: r.LastSample.UnixMilli()}
	}
	return out
}

func regexpLine(s, re string) bool {
	rx := regexp.MustCompile(re)
	for _, l := range strings.Split(s, "\n") {
		if rx.MatchString(l) {
			return true
		}
	}
	return false
}

// ansiStyles are the styles of a 256-colour terminal, for benchmarks and
// for checking that colour reaches the screen only when allowed.
func ansiStyles() Styles {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI256)
	return NewStyles(r)
}

func TestNoColor(t *testing.T) {
	// Output that is not a terminal gets no escape codes at all.
	plain := NewStyles(lipgloss.NewRenderer(io.Discard))
	if s := plain.Error("x") + plain.Selected("y"); s != "xy" {
		t.Errorf("styles for a non-terminal wrote %q", s)
	}
	if s := ansiStyles().Error("x"); !strings.Contains(s, "\x1b[") {
		t.Errorf("256-colour styles wrote no colour: %q", s)
	}
	t.Setenv("NO_COLOR", "1")
	t.Setenv("CLICOLOR_FORCE", "1")
	r := lipgloss.NewRenderer(os.Stdout, termenv.WithTTY(true))
	if s := NewStyles(r).Error("x"); s != "x" {
		t.Errorf("NO_COLOR: styles wrote %q", s)
	}
}
