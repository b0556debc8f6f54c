// Package top is the logic of `bpfperf top`: rows that derive their own
// rates from two readings of the daemon's cumulative counters, sorting and
// filtering, the bubbletea model (keys, sampling off the drawing path,
// reconnecting), rendering and charts, and the one-shot report of --once.
package top

import (
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// Row is one program as top shows it: the daemon's latest reading plus the
// reading before it, so every rate is top's own, over the period between
// the two samples the daemon took (not between our requests: the daemon
// reads the kernel on its own clock).
type Row struct {
	api.ProgRow
	prev     api.Counters
	prevAt   time.Time
	havePrev bool
}

// at is when the row's counters were read.
func (r *Row) at() time.Time { return r.LastSample }

// Period is the time between the two readings, 0 without two readings.
func (r *Row) Period() time.Duration {
	if !r.havePrev {
		return 0
	}
	return r.at().Sub(r.prevAt)
}

// delta is what the program did between the two readings; ok is false
// without two readings, a period, or with counters going backwards.
func (r *Row) delta() (api.Delta, bool) {
	return api.DeltaBetween(r.prev, r.Counters, r.Period())
}

// RunsPerSec is the runs per second over the period.
func (r *Row) RunsPerSec() (float64, bool) {
	d, ok := r.delta()
	if !ok {
		return fallback(r.Rates.RunsPerSec)
	}
	return d.RunsPerSec()
}

// AvgNs is the mean run time over the period; absent when nothing ran.
func (r *Row) AvgNs() (float64, bool) {
	d, ok := r.delta()
	if !ok {
		return fallback(r.Rates.AvgNsPerRun)
	}
	return d.AvgNsPerRun()
}

// CPUPercent is run time over wall time in the period, relative to one
// CPU (100 = one CPU's worth), like bpftop.
func (r *Row) CPUPercent() (float64, bool) {
	d, ok := r.delta()
	if !ok {
		return fallback(r.Rates.CPUPercent)
	}
	return d.CPUPercent()
}

// AvgNsSinceLoad is the mean run time over the program's whole life.
func (r *Row) AvgNsSinceLoad() (float64, bool) { return r.Counters.AvgNsSinceLoad() }

// fallback uses the daemon's rate (over its own last interval) until top
// has two readings of its own, so the first screen is not empty.
func fallback(f *float64) (float64, bool) {
	if f == nil {
		return 0, false
	}
	return *f, true
}

// rowKey identifies a program instance across refreshes.
type rowKey struct {
	boot string
	id   uint32
	tag  string
}

func keyOf(p *api.ProgRow) rowKey { return rowKey{p.BootID, p.ID, p.Tag} }

// Table holds the rows of the latest refresh, keyed by instance.
type Table struct {
	rows map[rowKey]*Row
}

// Update folds a new reading into the table, taken at now (used when the
// daemon does not say when it read a program). A program the daemon has
// not read again since the last refresh keeps its earlier rates; programs
// gone from the reading are dropped.
func (t *Table) Update(progs []api.ProgRow, now time.Time) {
	next := make(map[rowKey]*Row, len(progs))
	for i := range progs {
		p := progs[i]
		if p.LastSample.IsZero() {
			p.LastSample = now
		}
		// Milliseconds, as counters-only readings carry them, so the same
		// reading from either listing compares equal.
		p.LastSample = time.UnixMilli(p.LastSample.UnixMilli())
		k := keyOf(&p)
		old := t.rows[k]
		r := &Row{ProgRow: p}
		switch {
		case old == nil:
		case !p.LastSample.After(old.LastSample):
			// No new reading from the daemon: keep the earlier pair.
			r.prev, r.prevAt, r.havePrev = old.prev, old.prevAt, old.havePrev
			r.Counters, r.LastSample = old.Counters, old.LastSample
		default:
			r.prev, r.prevAt, r.havePrev = old.Counters, old.LastSample, true
		}
		next[k] = r
	}
	t.rows = next
}

// UpdateCounters folds a counters-only reading into the table: programs
// keep what the last full listing said of them, and programs no longer
// listed are dropped. It reports false when a program it does not know
// appeared, which only a full listing can describe.
func (t *Table) UpdateCounters(progs []api.ProgCounters) bool {
	type idTag struct {
		id  uint32
		tag string
	}
	byID := make(map[idTag]*Row, len(t.rows))
	for k, r := range t.rows {
		byID[idTag{k.id, k.tag}] = r
	}
	next := make(map[rowKey]*Row, len(progs))
	complete := true
	for _, p := range progs {
		old := byID[idTag{p.ID, p.Tag}]
		if old == nil {
			complete = false
			continue
		}
		r := *old
		if at := time.UnixMilli(p.LastSampleMs); at.After(old.LastSample) {
			r.prev, r.prevAt, r.havePrev = old.Counters, old.LastSample, true
			r.Counters, r.LastSample = p.Counters, at
		}
		next[keyOf(&r.ProgRow)] = &r
	}
	t.rows = next
	return complete
}

// Rows returns the rows in no particular order.
func (t *Table) Rows() []*Row {
	out := make([]*Row, 0, len(t.rows))
	for _, r := range t.rows {
		out = append(out, r)
	}
	return out
}

// Len is the number of programs in the table.
func (t *Table) Len() int { return len(t.rows) }
