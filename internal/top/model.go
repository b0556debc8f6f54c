package top

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/bpfperf/bpfperf/api"
)

// Source is what top reads from the daemon. *api.Client is one; tests
// pass fakes.
type Source interface {
	Status() (api.Status, error)
	Progs(all bool) ([]api.ProgRow, error)
	ProgCounters() ([]api.ProgCounters, error)
	Show(prog string) (api.ProgDetail, error)
	History(prog string, since, until time.Time, step time.Duration) (api.History, error)
	Events(since, until time.Time, prog string) (api.Events, error)
}

var _ Source = (*api.Client)(nil)

// Errors for bad settings.
var ErrBadInterval = errors.New("bad refresh interval")

// Limits of the refresh interval.
const (
	MinInterval = 100 * time.Millisecond
	MaxInterval = time.Hour
)

// Smallest terminal the view draws in.
const (
	MinWidth  = 60
	MinHeight = 10
)

// CheckInterval validates a refresh interval.
func CheckInterval(d time.Duration) error {
	if d < MinInterval || d > MaxInterval {
		return fmt.Errorf("%w %v: want %v to %v", ErrBadInterval, d, MinInterval, MaxInterval)
	}
	return nil
}

// intervals are the steps + and - move through.
var intervals = []time.Duration{
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
}

// Windows are the chart windows of the detail view, drawn from the store.
var Windows = []time.Duration{5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// Config is what the command passes in.
type Config struct {
	Host, Kernel string
	Interval     time.Duration
	Sort         string // a column key; "" is cpu
	Reverse      bool
	Filter       string
	Styles       Styles
	Now          func() time.Time // nil is time.Now
}

// Model is the bubbletea model of `bpfperf top`.
type Model struct {
	src Source
	cfg Config
	now func() time.Time

	table      Table
	status     api.Status
	haveStatus bool
	statusAt   time.Time
	fullAt     time.Time // last full listing; counters-only ones in between
	needFull   bool      // a program appeared that only a full listing describes
	err        error     // the last failed refresh, nil when connected
	errSince   time.Time // when the daemon stopped answering
	samples    int       // refreshes that succeeded

	view    []*Row    // filtered and sorted
	cols    []*Column // shown columns
	sortKey string
	reverse bool
	filter  string
	typing  bool // the filter prompt has the keyboard

	paused   bool
	interval time.Duration
	gen      int  // ticks of older intervals are dropped
	fetching bool // a refresh is in flight

	cursor   int
	offset   int
	selected rowKey
	follow   bool // the user picked a row: keep it under the cursor

	help   bool
	detail *detail

	width, height int
}

// detail is the state of the selected program's view.
type detail struct {
	key      rowKey
	row      Row
	window   int // index into Windows
	hist     []api.HistoryPoint
	events   []api.Event
	meta     *api.ProgDetail
	err      error
	at       time.Time // of the last answer
	since    time.Time
	until    time.Time
	fetching bool
	gen      int
}

// New returns a model reading from src.
func New(src Source, cfg Config) *Model {
	m := &Model{src: src, cfg: cfg, now: cfg.Now, interval: cfg.Interval, sortKey: cfg.Sort, reverse: cfg.Reverse, filter: cfg.Filter}
	if m.now == nil {
		m.now = time.Now
	}
	if m.sortKey == "" {
		m.sortKey = "cpu"
	}
	if m.interval <= 0 {
		m.interval = time.Second
	}
	return m
}

// Messages.
type (
	tickMsg   struct{ gen int }
	sampleMsg struct {
		at        time.Time
		progs     []api.ProgRow
		counters  []api.ProgCounters // instead of progs: counters only
		lean      bool
		status    api.Status
		statusErr error
		err       error
	}
	detailMsg struct {
		key          rowKey
		gen          int
		since, until time.Time
		hist         []api.HistoryPoint
		events       []api.Event
		meta         *api.ProgDetail
		err          error
	}
)

// Init starts the first refresh.
func (m *Model) Init() tea.Cmd {
	m.fetching = true
	return tea.Batch(m.fetch(), m.tick())
}

// fetch reads the daemon off the drawing path: bubbletea runs commands in
// their own goroutines.
// The daemon's status (its cost over the last minute) is read every few
// seconds, not every refresh.
func (m *Model) fetch() tea.Cmd {
	src, now := m.src, m.now
	wantStatus := !m.haveStatus || m.err != nil || now().Sub(m.statusAt) >= statusEvery
	// Owners, attach points and the like change rarely: a full listing
	// every few seconds, counters only in between (most of top's cost is
	// decoding the daemon's answer).
	lean := m.samples > 0 && !m.needFull && m.err == nil && now().Sub(m.fullAt) < fullEvery
	return func() tea.Msg {
		msg := sampleMsg{at: now(), lean: lean, statusErr: errNotAsked}
		var err error
		if lean {
			msg.counters, err = src.ProgCounters()
		} else {
			msg.progs, err = src.Progs(false)
		}
		msg.err = err
		if err == nil && wantStatus {
			msg.status, msg.statusErr = src.Status()
		}
		return msg
	}
}

const (
	statusEvery = 5 * time.Second
	fullEvery   = 5 * time.Second
)

var errNotAsked = errors.New("status not asked for")

func (m *Model) tick() tea.Cmd {
	gen := m.gen
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{gen: gen} })
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.scroll()
		return m, nil
	case tickMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		cmds := []tea.Cmd{m.tick()}
		if !m.paused && !m.fetching {
			m.fetching = true
			cmds = append(cmds, m.fetch())
		}
		if m.detail != nil && !m.paused {
			cmds = append(cmds, m.fetchDetail(false))
		}
		return m, tea.Batch(cmds...)
	case sampleMsg:
		m.fetching = false
		m.apply(msg)
		return m, nil
	case detailMsg:
		m.applyDetail(msg)
		return m, nil
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	return m, nil
}

// apply folds a refresh into the model.
func (m *Model) apply(msg sampleMsg) {
	if msg.err != nil {
		if m.err == nil {
			m.errSince = msg.at
		}
		m.err = msg.err
		return
	}
	m.err = nil
	m.samples++
	if msg.lean {
		m.needFull = !m.table.UpdateCounters(msg.counters)
	} else {
		m.table.Update(msg.progs, msg.at)
		m.fullAt, m.needFull = msg.at, false
	}
	if msg.statusErr == nil {
		m.status, m.haveStatus, m.statusAt = msg.status, true, msg.at
	}
	m.refresh()
}

// refresh recomputes the shown rows after new data, a sort or a filter.
func (m *Model) refresh() {
	rows := m.table.Rows()
	m.cols = Visible(rows)
	col, err := ColumnByKey(m.sortKey)
	if err != nil {
		col, _ = ColumnByKey("cpu")
	}
	m.view = Filter(rows, m.filter)
	Sort(m.view, col, m.reverse)
	// Keep the selected program under the cursor.
	if i := slices.IndexFunc(m.view, func(r *Row) bool { return keyOf(&r.ProgRow) == m.selected }); i >= 0 && m.follow {
		m.cursor = i
	}
	m.cursor = max(0, min(m.cursor, len(m.view)-1))
	if len(m.view) > 0 {
		m.selected = keyOf(&m.view[m.cursor].ProgRow)
	}
	if m.detail != nil {
		if r := m.table.rows[m.detail.key]; r != nil {
			m.detail.row = *r
		}
	}
	m.scroll()
}

// bodyHeight is how many table rows fit.
func (m *Model) bodyHeight() int { return max(1, m.height-4) }

func (m *Model) scroll() {
	h := m.bodyHeight()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.view)-h))
}

func (m *Model) moveCursor(to int) {
	m.follow = true
	m.cursor = max(0, min(to, len(m.view)-1))
	if len(m.view) > 0 {
		m.selected = keyOf(&m.view[m.cursor].ProgRow)
	}
	m.scroll()
}

// key handles a key press.
func (m *Model) key(k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyCtrlC {
		return tea.Quit
	}
	// Keys typed quickly (or sent by tmux) can arrive as one message of
	// several runes: handle them one by one.
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste {
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: k.Alt}))
		}
		return tea.Batch(cmds...)
	}
	if m.typing {
		switch k.Type {
		case tea.KeyEnter:
			m.typing = false
		case tea.KeyEsc:
			m.typing, m.filter = false, ""
		case tea.KeyBackspace:
			if r := []rune(m.filter); len(r) > 0 {
				m.filter = string(r[:len(r)-1])
			}
		case tea.KeyRunes, tea.KeySpace:
			m.filter += string(k.Runes)
		}
		m.refresh()
		return nil
	}
	if m.help {
		m.help = false
		if k.String() == "q" {
			return tea.Quit
		}
		return nil
	}
	switch k.String() {
	case "q":
		return tea.Quit
	case "?", "h", "f1":
		m.help = true
		return nil
	case "p", " ":
		m.paused = !m.paused
		if !m.paused && !m.fetching {
			m.fetching = true
			return m.fetch()
		}
		return nil
	case "+", "=":
		return m.setInterval(+1)
	case "-", "_":
		return m.setInterval(-1)
	}
	if m.detail != nil {
		return m.detailKey(k)
	}
	switch k.String() {
	case "/":
		m.typing = true
	case "esc":
		m.filter = ""
		m.refresh()
	case "<", ",":
		m.cycleSort(-1)
	case ">", ".", "s":
		m.cycleSort(+1)
	case "r":
		m.reverse = !m.reverse
		m.refresh()
	case "up", "k":
		m.moveCursor(m.cursor - 1)
	case "down", "j":
		m.moveCursor(m.cursor + 1)
	case "pgup", "ctrl+b":
		m.moveCursor(m.cursor - m.bodyHeight())
	case "pgdown", "ctrl+f":
		m.moveCursor(m.cursor + m.bodyHeight())
	case "home", "g":
		m.moveCursor(0)
	case "end", "G":
		m.moveCursor(len(m.view) - 1)
	case "enter":
		if len(m.view) == 0 {
			return nil
		}
		r := m.view[m.cursor]
		m.detail = &detail{key: keyOf(&r.ProgRow), row: *r}
		return m.fetchDetail(true)
	default:
		// Sort keys by column: the digit of the column's position.
		if s := k.String(); len(s) == 1 && s[0] >= '1' && s[0] <= '9' {
			if i := int(s[0] - '1'); i < len(m.cols) {
				m.setSort(m.cols[i].Key)
			}
		}
	}
	return nil
}

func (m *Model) detailKey(k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "esc", "backspace", "enter", "left":
		m.detail = nil
	case "w", "]", "right":
		m.detail.window = min(m.detail.window+1, len(Windows)-1)
		return m.fetchDetail(true)
	case "W", "[":
		m.detail.window = max(m.detail.window-1, 0)
		return m.fetchDetail(true)
	}
	return nil
}

// setSort sorts by key; the same key again reverses.
func (m *Model) setSort(key string) {
	if m.sortKey == key {
		m.reverse = !m.reverse
	} else {
		m.sortKey, m.reverse = key, false
	}
	m.refresh()
}

func (m *Model) cycleSort(step int) {
	i := slices.IndexFunc(m.cols, func(c *Column) bool { return c.Key == m.sortKey })
	n := len(m.cols)
	if n == 0 {
		return
	}
	m.sortKey = m.cols[((i+step)%n+n)%n].Key
	m.reverse = false
	m.refresh()
}

func (m *Model) setInterval(step int) tea.Cmd {
	i, _ := slices.BinarySearch(intervals, m.interval)
	i = max(0, min(i+step, len(intervals)-1))
	if intervals[i] == m.interval {
		return nil
	}
	m.interval = intervals[i]
	m.gen++
	return m.tick()
}

// fetchDetail reads the selected program's history, events and metadata
// for the chosen window. Without force it skips when the last answer is
// recent for the window (a chart column spans window/width).
func (m *Model) fetchDetail(force bool) tea.Cmd {
	d := m.detail
	if d == nil || (d.fetching && !force) {
		return nil
	}
	window := Windows[d.window]
	now := m.now()
	cols := max(m.width-10, 20) * 2 // braille dots across
	if !force && now.Sub(d.at) < max(m.interval, window/time.Duration(cols)) {
		return nil
	}
	d.fetching = true
	d.gen++
	key, gen, src := d.key, d.gen, m.src
	ident, identID, id := d.row.Identity, d.row.IdentityID, strconv.FormatUint(uint64(d.row.ID), 10)
	wantMeta := d.meta == nil
	since, until := now.Add(-window), now
	step := window / time.Duration(cols)
	return func() tea.Msg {
		msg := detailMsg{key: key, gen: gen, since: since, until: until}
		// By identity the history spans reloads (so does an id's, once
		// the daemon has settled its identity); before that, by id.
		ref := identID
		if ref == "" {
			ref = id
		}
		h, err := src.History(ref, since, until, step)
		if err != nil && ref != id {
			h, err = src.History(id, since, until, step)
		}
		if err != nil {
			msg.err = err
			return msg
		}
		msg.hist = h.Points
		if ev, err := src.Events(since, until, ref); err == nil {
			for _, e := range ev.Events {
				if (e.Identity == ident && ident != "") || (e.ID == key.id && e.ID != 0) {
					msg.events = append(msg.events, e)
				}
			}
		}
		if wantMeta {
			if d, err := src.Show(id); err == nil {
				msg.meta = &d
			}
		}
		return msg
	}
}

func (m *Model) applyDetail(msg detailMsg) {
	d := m.detail
	if d == nil || d.key != msg.key || d.gen != msg.gen {
		return
	}
	d.fetching = false
	d.at = m.now()
	d.err = msg.err
	if msg.err != nil {
		return
	}
	d.hist, d.events, d.since, d.until = msg.hist, msg.events, msg.since, msg.until
	if msg.meta != nil {
		d.meta = msg.meta
	}
}

// Run shows the model full-screen until the user quits. Redraws are capped
// at 20 frames a second (enough for typing; the data changes once per
// refresh), and the garbage collector runs less often: each refresh
// decodes the whole program list and throws it away, and a top that costs
// more than the programs it watches is no use.
func Run(m *Model) error {
	debug.SetGCPercent(400)
	_, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithFPS(20)).Run()
	return err
}
