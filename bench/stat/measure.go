// Package stat measures what the BPF programs on a host cost while a
// command runs (or for a window of time): the deltas of their cumulative
// run-time stats between a reading taken just before the command starts
// and one just after it ends, with readings in between so that programs
// the command loads and unloads still count. It is the macro-benchmark
// beside bench's BPF_PROG_TEST_RUN micro-benchmarks, and reports in the
// same formats (report.go).
package stat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Counters are one program's cumulative run-time stats.
type Counters struct {
	RunCnt          uint64 `json:"run_cnt"`
	RunTimeNs       uint64 `json:"run_time_ns"`
	RecursionMisses uint64 `json:"recursion_misses"`
}

// Reading is one program as one reading saw it.
type Reading struct {
	ID   uint32
	Type string // bpftool's name of the program type
	// Name is the program's full name (bpftool's); KernelName the one the
	// kernel keeps, cut to 15 characters, where the reader knows it.
	Name       string
	KernelName string
	Tag        string // 16 hex digits
	Counters
}

// Reader reads every loaded program's counters at once (a sweep of the
// kernel, or the daemon's latest).
type Reader func() ([]Reading, error)

// Program is what one program instance did over a measurement: the
// difference between two of its readings.
type Program struct {
	ID         uint32 `json:"id"`
	Type       string `json:"type"`
	Name       string `json:"name"`
	KernelName string `json:"kernel_name,omitempty"`
	Tag        string `json:"tag"`
	// Instance tells apart programs of one type and name (one object
	// loaded twice, or one program per device): 1 for the lowest id of
	// them, 2 for the next, and so on, among every program the readings
	// saw, reported or not. A program that came after another of its
	// name was gone (a reload) takes its place, not a new number.
	Instance int `json:"instance"`
	// Delta is Last less First.
	Delta Counters `json:"delta"`
	// First is the reading the delta starts from: the one just before the
	// command started, or zero for a program loaded during it (its
	// counters start at zero when it loads).
	First Counters `json:"first"`
	// Last is the reading the delta ends at: the one just after the
	// command ended, or the last one before the program was unloaded.
	Last Counters `json:"last"`
	// Loaded and Unloaded say the program came or went during the
	// measurement. An unloaded program's runs after its last reading are
	// not counted: at most one interval's worth.
	Loaded   bool `json:"loaded_during,omitempty"`
	Unloaded bool `json:"unloaded_during,omitempty"`
}

// Measurement is one measured run of the command (or one window).
type Measurement struct {
	Start    time.Time     `json:"start"`
	Wall     time.Duration `json:"wall_ns"`
	Readings int           `json:"readings"`
	// ExitCode is the command's, -1 for a window without one.
	ExitCode int `json:"exit_code"`
	// Programs are those that ran during the measurement (or were
	// selected by name), by id.
	Programs []Program `json:"programs"`
}

// Config is how to measure.
type Config struct {
	Read Reader
	// Interval is the time between readings while the command runs.
	Interval time.Duration
	// Named selects programs by name or id (--prog): they are reported
	// whether they ran or not. Match selects, among the programs that
	// ran, those to report too (--filter). With neither, every program
	// that ran is reported; with Named alone, only those.
	Named func(Reading) bool
	Match func(Reading) bool
}

// reported says whether a program's delta is reported.
func (c Config) reported(r Reading, ran bool) bool {
	switch {
	case c.Named != nil && c.Named(r):
		return true
	case c.Match != nil:
		return ran && c.Match(r)
	default:
		return ran && c.Named == nil
	}
}

// ErrNoReading is returned when the first reading fails: nothing can be
// measured.
var ErrNoReading = errors.New("cannot read the programs' stats")

// Run is what is measured: it starts the command (or a window) and
// returns a wait that blocks until it ends and gives its exit code (-1
// for a window). A command that cannot start is an error.
type Run func(ctx context.Context) (wait func() int, err error)

// Measure reads every program, starts run, reads every Interval until it
// ends, and reads once more. The measurement covers exactly the span
// between the reading before run starts and the one after it ends.
func Measure(ctx context.Context, cfg Config, run Run) (Measurement, error) {
	if cfg.Interval <= 0 {
		return Measurement{}, fmt.Errorf("stat: interval %v must be positive", cfg.Interval)
	}
	start := time.Now()
	first, err := cfg.Read()
	if err != nil {
		return Measurement{}, fmt.Errorf("%w: %w", ErrNoReading, err)
	}
	m := Measurement{Start: start, Readings: 1}
	t := newTracker(first)
	wait, err := run(ctx)
	if err != nil {
		return Measurement{}, err
	}
	done := make(chan int, 1)
	go func() { done <- wait() }()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for running := true; running; {
		select {
		case m.ExitCode = <-done:
			running = false
		case <-tick.C:
			// A failed reading in between loses only resolution for
			// programs that vanish; the final one must work.
			if rs, err := cfg.Read(); err == nil {
				t.see(rs)
				m.Readings++
			}
		}
	}
	last, err := cfg.Read()
	m.Wall = time.Since(m.Start)
	if err != nil {
		return m, fmt.Errorf("stat: the reading after the command: %w", err)
	}
	m.Readings++
	t.see(last)
	m.Programs = t.programs(last, cfg)
	return m, nil
}

// tracker keeps each program's first and latest reading, and the
// readings (by number, the first is 0) it was first and last seen in.
type tracker struct {
	first  map[uint32]Reading // as the first reading saw them
	latest map[uint32]Reading // the latest reading of every program seen
	seen   map[uint32]span
	n      int // the latest reading's number
}

// span is the readings a program was seen in, first to last.
type span struct{ from, to int }

func newTracker(first []Reading) *tracker {
	t := &tracker{first: map[uint32]Reading{}, latest: map[uint32]Reading{}, seen: map[uint32]span{}}
	for _, r := range first {
		t.first[r.ID] = r
		t.latest[r.ID] = r
		t.seen[r.ID] = span{0, 0}
	}
	return t
}

func (t *tracker) see(rs []Reading) {
	t.n++
	for _, r := range rs {
		s, ok := t.seen[r.ID]
		if !ok || t.latest[r.ID].Tag != r.Tag {
			s.from = t.n
		}
		s.to = t.n
		t.seen[r.ID] = s
		t.latest[r.ID] = r
	}
}

// instances numbers the programs sharing a type and name (Program.
// Instance): in id order, which is load order, each takes the lowest
// number whose holder was last seen before it was first seen.
func (t *tracker) instances() map[uint32]int {
	type group struct{ typ, name string }
	byGroup := map[group][]uint32{}
	for id, r := range t.latest {
		g := group{r.Type, r.Name}
		if r.Name == "" {
			g.name = "tag=" + r.Tag
		}
		byGroup[g] = append(byGroup[g], id)
	}
	out := make(map[uint32]int, len(t.latest))
	for _, ids := range byGroup {
		slices.Sort(ids)
		var lastSeen []int // by instance number less one: its holder's last reading
		for _, id := range ids {
			s := t.seen[id]
			i := slices.IndexFunc(lastSeen, func(to int) bool { return to < s.from })
			if i < 0 {
				i = len(lastSeen)
				lastSeen = append(lastSeen, 0)
			}
			lastSeen[i] = s.to
			out[id] = i + 1
		}
	}
	return out
}

// programs turns the readings into deltas. A program in the first
// reading counts from it; one that appeared later counts from zero. One
// missing from the last reading counts up to its latest.
func (t *tracker) programs(last []Reading, cfg Config) []Program {
	present := map[uint32]bool{}
	for _, r := range last {
		present[r.ID] = true
	}
	instance := t.instances()
	var out []Program
	for id, r := range t.latest {
		f, before := t.first[id]
		if before && f.Tag != r.Tag {
			// Ids are not reused within a boot in practice; if one was,
			// this is another program, loaded during the measurement.
			before = false
		}
		p := Program{ID: id, Type: r.Type, Name: r.Name, KernelName: r.KernelName, Tag: r.Tag, Instance: instance[id],
			Last: r.Counters, Loaded: !before, Unloaded: !present[id]}
		if before {
			p.First = f.Counters
		}
		p.Delta = Counters{
			RunCnt:          sub(p.Last.RunCnt, p.First.RunCnt),
			RunTimeNs:       sub(p.Last.RunTimeNs, p.First.RunTimeNs),
			RecursionMisses: sub(p.Last.RecursionMisses, p.First.RecursionMisses),
		}
		if cfg.reported(r, p.Delta.RunCnt > 0 || p.Delta.RecursionMisses > 0) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Program) int { return int(a.ID) - int(b.ID) })
	return out
}

// sub is a - b, or 0 where a counter went backwards (stats were reset by
// nobody we know of; a wrapped counter would take centuries).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
