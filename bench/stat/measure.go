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
	Name string
	Tag  string // 16 hex digits
	Counters
}

// Reader reads every loaded program's counters at once (a sweep of the
// kernel, or the daemon's latest).
type Reader func() ([]Reading, error)

// Program is what one program instance did over a measurement: the
// difference between two of its readings.
type Program struct {
	ID   uint32 `json:"id"`
	Type string `json:"type"`
	Name string `json:"name"`
	Tag  string `json:"tag"`
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

// tracker keeps each program's first and latest reading.
type tracker struct {
	first  map[uint32]Reading // as the first reading saw them
	latest map[uint32]Reading // the latest reading of every program seen
}

func newTracker(first []Reading) *tracker {
	t := &tracker{first: map[uint32]Reading{}, latest: map[uint32]Reading{}}
	for _, r := range first {
		t.first[r.ID] = r
		t.latest[r.ID] = r
	}
	return t
}

func (t *tracker) see(rs []Reading) {
	for _, r := range rs {
		t.latest[r.ID] = r
	}
}

// programs turns the readings into deltas. A program in the first
// reading counts from it; one that appeared later counts from zero. One
// missing from the last reading counts up to its latest.
func (t *tracker) programs(last []Reading, cfg Config) []Program {
	present := map[uint32]bool{}
	for _, r := range last {
		present[r.ID] = true
	}
	var out []Program
	for id, r := range t.latest {
		f, before := t.first[id]
		if before && f.Tag != r.Tag {
			// Ids are not reused within a boot in practice; if one was,
			// this is another program, loaded during the measurement.
			before = false
		}
		p := Program{ID: id, Type: r.Type, Name: r.Name, Tag: r.Tag, Last: r.Counters, Loaded: !before, Unloaded: !present[id]}
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
