package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Latency windows: one series per program instance, in group groupLatency,
// one sample per window written when it ends (at its end time). Unlike
// bpf_stats and the counters a sample stands alone: a window's runs, not a
// running total, so a skipped window or a restart needs no bookkeeping.
//
// Each sample has latencyColumns columns, in this order:
//
//	0      window ms   how long the window timed
//	1      entries     runs the fentry program saw
//	2      timed       runs in the histogram
//	3      untimed     runs left out (exit without entry, nested too deep)
//	4      sum ns      the timed runs' total
//	5      max ns      the longest timed run
//	6      floor ns    the calibrated timing floor in force
//	7      added ns    the calibrated cost timing added to each run
//	8..11  p50, p90, p99, p99.9 in ns, raw (the floor not taken off), read
//	       from the full-resolution histogram when the window ended
//	12..47 timed runs per power of two (internal/loglinear.Octaves of them)
//
// A window that counted a perf event per run (cycles, say) has ten more,
// after the octaves; a window without one, or one written before they
// existed, has none (a series whose width changes starts a new chunk):
//
//	48     event       the perf event counted (perfevent.Event) plus 1
//	49     counted     runs the event counted
//	50     missed      timed runs it could not count
//	51     sum         the counted runs' total
//	52     max         the largest count of one run
//	53     floor       the calibrated count of an empty run
//	54..57 p50, p90, p99, p99.9 of the count, raw (the floor not taken off)
const (
	LatColWindowMs = iota
	LatColEntries
	LatColTimed
	LatColUntimed
	LatColSum
	LatColMax
	LatColFloor
	LatColAdded
	LatColP50
	LatColP90
	LatColP99
	LatColP999
	LatColOctaves
)

// LatencyOctaves is how many power-of-two columns a window keeps; it
// matches internal/loglinear.Octaves (checked by a test).
const LatencyOctaves = 36

const (
	latencyColumns = LatColOctaves + LatencyOctaves
	// The event's columns, from latencyColumns on.
	latColEvent = latencyColumns + iota - 1
	latColEvCounted
	latColEvMissed
	latColEvSum
	latColEvMax
	latColEvFloor
	latColEvP50
	latencyEventColumns = latColEvP50 + 4
)

// LatencyWindow is one stored latency window of an instance.
type LatencyWindow struct {
	Key     InstanceKey
	End     time.Time
	Length  time.Duration
	Entries uint64
	Timed   uint64
	Untimed uint64
	SumNs   uint64
	MaxNs   uint64
	FloorNs uint64
	AddedNs uint64
	// Quantiles are p50, p90, p99 and p99.9 in ns, the floor not taken off.
	Quantiles [4]uint64
	Octaves   [LatencyOctaves]uint64
	// PerRun is the perf event counted per run beside the time, nil where
	// the window counted none.
	PerRun *LatencyEvent
}

// LatencyEvent is a window's count of one perf event per run.
type LatencyEvent struct {
	Event   uint8 // a perfevent.Event
	Counted uint64
	Missed  uint64
	Sum     uint64
	Max     uint64
	Floor   uint64
	// Quantiles are p50, p90, p99 and p99.9 of one run's count, the
	// floor not taken off.
	Quantiles [4]uint64
}

func (w LatencyWindow) columns() []uint64 {
	n := latencyColumns
	if w.PerRun != nil {
		n = latencyEventColumns
	}
	v := make([]uint64, n)
	v[LatColWindowMs], v[LatColEntries], v[LatColTimed], v[LatColUntimed] = uint64(w.Length.Milliseconds()), w.Entries, w.Timed, w.Untimed
	v[LatColSum], v[LatColMax], v[LatColFloor], v[LatColAdded] = w.SumNs, w.MaxNs, w.FloorNs, w.AddedNs
	copy(v[LatColP50:], w.Quantiles[:])
	copy(v[LatColOctaves:], w.Octaves[:])
	if e := w.PerRun; e != nil {
		v[latColEvent], v[latColEvCounted], v[latColEvMissed] = uint64(e.Event)+1, e.Counted, e.Missed
		v[latColEvSum], v[latColEvMax], v[latColEvFloor] = e.Sum, e.Max, e.Floor
		copy(v[latColEvP50:], e.Quantiles[:])
	}
	return v
}

func latencyWindowFrom(k InstanceKey, ms int64, v []uint64) (LatencyWindow, bool) {
	if len(v) != latencyColumns && (len(v) != latencyEventColumns || v[latColEvent] == 0) {
		return LatencyWindow{}, false
	}
	w := LatencyWindow{Key: k, End: time.UnixMilli(ms), Length: time.Duration(v[LatColWindowMs]) * time.Millisecond}
	w.Entries, w.Timed, w.Untimed = v[LatColEntries], v[LatColTimed], v[LatColUntimed]
	w.SumNs, w.MaxNs, w.FloorNs, w.AddedNs = v[LatColSum], v[LatColMax], v[LatColFloor], v[LatColAdded]
	copy(w.Quantiles[:], v[LatColP50:LatColOctaves])
	copy(w.Octaves[:], v[LatColOctaves:latencyColumns])
	if len(v) == latencyEventColumns {
		e := &LatencyEvent{Event: uint8(v[latColEvent] - 1), Counted: v[latColEvCounted], Missed: v[latColEvMissed],
			Sum: v[latColEvSum], Max: v[latColEvMax], Floor: v[latColEvFloor]}
		copy(e.Quantiles[:], v[latColEvP50:])
		w.PerRun = e
	}
	return w, true
}

// WriteLatency appends latency windows in one small transaction of their
// own: all or nothing. Each instance's windows must come in time order.
func (db *DB) WriteLatency(ws ...LatencyWindow) error {
	if len(ws) == 0 {
		return nil
	}
	return db.writeSamples("latency", len(ws), func(head, chunks *bolt.Bucket, i int) error {
		return db.appendSample(head, chunks, seriesKey(ws[i].Key, groupLatency), ws[i].End.UnixMilli(), ws[i].columns())
	})
}

// LatencySeries returns the instance's latency windows that ended in
// [from, to], oldest first.
func (db *DB) LatencySeries(k InstanceKey, from, to time.Time) ([]LatencyWindow, error) {
	var out []LatencyWindow
	err := db.view(func(tx *bolt.Tx) error {
		return readSeries(tx, seriesKey(k, groupLatency), from.UnixMilli(), to.UnixMilli(), func(t int64, v []uint64) {
			if w, ok := latencyWindowFrom(k, t, v); ok {
				out = append(out, w)
			}
		})
	})
	return out, err
}

// LastLatency returns the instance's newest latency window, and false when
// it has none.
func (db *DB) LastLatency(k InstanceKey) (LatencyWindow, bool, error) {
	var last LatencyWindow
	found := false
	err := db.newestFirst(seriesKey(k, groupLatency), func(t int64, v []uint64) {
		if w, ok := latencyWindowFrom(k, t, v); ok {
			last, found = w, true
		}
	}, func() bool { return found })
	return last, found, err
}
