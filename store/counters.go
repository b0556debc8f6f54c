package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Per-program perf counter series: one series per program instance, in
// group groupCounters, stored raw and cumulative like bpf_stats.
//
// Each sample has counterColumns columns, in this order:
//
//	0  mechanism   which mechanism counted (CounterExact)
//	1  present     bit i set when event i was counted (events in
//	               collectors.CounterEvent order: cpu-clock, cycles,
//	               instructions, llc-misses); a clear bit means absent,
//	               whatever its column holds
//	2  counted     runs the totals cover, summed over counting windows
//	3  entries     runs seen by the entry probe, summed over windows
//	4  cpu-clock   ns, scaled for multiplexing, summed over windows
//	5  cycles
//	6  instructions
//	7  llc-misses
//	8  window ms   sampled only: the profile window's length
//	9  samples     sampled only: cpu-clock samples in the program
//
// Records written before the sampled mechanism have columns 0..7 only and
// still read (window ms and samples 0); a series' open chunk of the old
// width is sealed when a sample of the new width comes.
//
// The mechanism column tells the two apart. Exact samples are cumulative
// over exact windows (below). A sampled sample (CounterSampled) is one
// continuous profile window on its own, written when it ends: the events'
// estimated totals in the window (samples × period), the runs bpf_stats
// counted in it, its length and its cpu-clock samples. Sampling has no
// kernel counter to accumulate, and a window that stands alone survives a
// daemon restart or a skipped window without bookkeeping.
//
// Exact counting runs in bounded windows; the columns only move while one
// is open. The daemon writes a sample when a window opens and when it
// closes, so the difference between two consecutive exact samples is one
// window's worth (or nothing, between windows). Per-run figures are derived at read time:
// Δevent / Δcounted.
const (
	CtrColMechanism = iota
	CtrColPresent
	CtrColCounted
	CtrColEntries
	CtrColEvents // first event column
)

// The columns after the events, and the widths of a sample.
const (
	CtrColWindowMs       = CtrColEvents + CounterEvents
	CtrColSamples        = CtrColWindowMs + 1
	counterColumns       = CtrColSamples + 1
	legacyCounterColumns = CtrColWindowMs
)

// CounterEvents is how many event columns a counter sample has.
const CounterEvents = 4

// CounterExact is the mechanism value of counts taken by fentry/fexit
// programs around each run.
const CounterExact = 1

// CounterSampled is the mechanism value of estimates from sampling perf
// events (continuous profile windows), one window per sample.
const CounterSampled = 2

// CounterSample is one cumulative reading of an instance's perf counters.
type CounterSample struct {
	Key       InstanceKey
	Time      time.Time
	Mechanism uint64
	Present   uint64 // bit i: event i was counted
	Counted   uint64
	Entries   uint64
	Values    [CounterEvents]uint64
	WindowMs  uint64 // sampled: the window's length
	Samples   uint64 // sampled: cpu-clock samples in the program
}

// Has reports whether event i was counted.
func (s CounterSample) Has(i int) bool { return i >= 0 && i < CounterEvents && s.Present&(1<<i) != 0 }

func (s CounterSample) columns() []uint64 {
	v := make([]uint64, counterColumns)
	v[CtrColMechanism], v[CtrColPresent], v[CtrColCounted], v[CtrColEntries] = s.Mechanism, s.Present, s.Counted, s.Entries
	copy(v[CtrColEvents:], s.Values[:])
	v[CtrColWindowMs], v[CtrColSamples] = s.WindowMs, s.Samples
	return v
}

func counterSampleFrom(k InstanceKey, ms int64, v []uint64) CounterSample {
	s := CounterSample{Key: k, Time: time.UnixMilli(ms)}
	if len(v) != counterColumns && len(v) != legacyCounterColumns {
		return s
	}
	s.Mechanism, s.Present, s.Counted, s.Entries = v[CtrColMechanism], v[CtrColPresent], v[CtrColCounted], v[CtrColEntries]
	copy(s.Values[:], v[CtrColEvents:CtrColEvents+CounterEvents])
	if len(v) == counterColumns {
		s.WindowMs, s.Samples = v[CtrColWindowMs], v[CtrColSamples]
	}
	return s
}

// WriteCounters appends counter samples in one small transaction of their
// own: all or nothing. Each instance's samples must come in time order.
// The instance's program record should exist (the sampler writes it when
// the program first appears); Check reports series without one.
func (db *DB) WriteCounters(samples ...CounterSample) error {
	if len(samples) == 0 {
		return nil
	}
	return db.writeSamples("counters", len(samples), func(head, chunks *bolt.Bucket, i int) error {
		s := samples[i]
		key := seriesKey(s.Key, groupCounters)
		// An open chunk of the old width is sealed; the new width starts a
		// chunk of its own.
		if c, err := db.openHead(head, key); err != nil {
			return err
		} else if c != nil && c.columns != counterColumns {
			if err := db.seal(head, chunks, key); err != nil {
				return err
			}
		}
		return db.appendSample(head, chunks, key, s.Time.UnixMilli(), s.columns())
	})
}

// writeSamples appends n samples of one kind (what, for the error) to
// their series in one small transaction of its own: all or nothing. each
// writes sample i.
func (db *DB) writeSamples(what string, n int, each func(head, chunks *bolt.Bucket, i int) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	err := db.update(func(tx *bolt.Tx) error {
		head, chunks := tx.Bucket(bucketHead), tx.Bucket(bucketChunks)
		chunks.FillPercent = 1.0
		for i := range n {
			if err := each(head, chunks, i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		clear(db.heads) // see WriteTicks
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// CounterSeries returns the instance's counter samples with from <= time
// <= to, oldest first.
func (db *DB) CounterSeries(k InstanceKey, from, to time.Time) ([]CounterSample, error) {
	var out []CounterSample
	err := db.view(func(tx *bolt.Tx) error {
		return readSeries(tx, seriesKey(k, groupCounters), from.UnixMilli(), to.UnixMilli(), func(t int64, v []uint64) {
			out = append(out, counterSampleFrom(k, t, v))
		})
	})
	return out, err
}

// LastCountersOf returns the instance's newest counter sample of one
// mechanism, and false when it has none. It reads chunks newest first and
// stops at the first that has one.
func (db *DB) LastCountersOf(k InstanceKey, mechanism uint64) (CounterSample, bool, error) {
	var last CounterSample
	found := false
	keep := func(t int64, v []uint64) {
		if s := counterSampleFrom(k, t, v); s.Mechanism == mechanism {
			last, found = s, true
		}
	}
	err := db.newestFirst(seriesKey(k, groupCounters), keep, func() bool { return found })
	return last, found, err
}

// newestFirst reads a series' chunks newest first, the open one, then the
// sealed ones, each in time order through keep, and stops after the first
// chunk at whose end done says so.
func (db *DB) newestFirst(key []byte, keep func(t int64, v []uint64), done func() bool) error {
	return db.view(func(tx *bolt.Tx) error {
		if hv := tx.Bucket(bucketHead).Get(key); hv != nil {
			if _, err := decodeChunk(hv, keep); err != nil {
				return fmt.Errorf("%w: open chunk %x: %v", ErrCorrupt, key, err)
			}
			if done() {
				return nil
			}
		}
		c := tx.Bucket(bucketChunks).Cursor()
		end := append(append([]byte(nil), key...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		ck, cv := c.Seek(end)
		if ck == nil {
			ck, cv = c.Last()
		} else {
			ck, cv = c.Prev()
		}
		for ; ck != nil && hasPrefix(ck, key) && len(ck) == len(key)+8; ck, cv = c.Prev() {
			if _, _, err := decodeSealed(cv, keep); err != nil {
				return fmt.Errorf("%w: chunk %x: %v", ErrCorrupt, ck, err)
			}
			if done() {
				return nil
			}
		}
		return nil
	})
}
