package store

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Rollups keep long history small. For every program instance and every
// minute (and hour) that has samples, a rollup point holds the first and the
// last sample of that bucket: with cumulative counters, rates between any two
// rollup points are as exact as between the raw samples they came from.
//
// A rollup point is stored as a chunk sample at the bucket's start time with
// eight columns: first's offset (ms) from the bucket start, first's three
// counters, last's offset, last's three counters.

// Resolution is a rollup bucket size, or Raw.
type Resolution time.Duration

const (
	Raw      Resolution = 0
	Minute   Resolution = Resolution(time.Minute)
	Hour     Resolution = Resolution(time.Hour)
	rollCols            = 2 + 2*statsColumns
)

var resolutions = []Resolution{Minute, Hour}

func (r Resolution) group() byte {
	switch r {
	case Minute:
		return 1
	case Hour:
		return 2
	}
	return groupStats
}

func (r Resolution) watermarkKey() []byte { return fmt.Appendf(nil, "rollup_%d", r.group()) }

func (r Resolution) String() string {
	if r == Raw {
		return "raw"
	}
	return time.Duration(r).String()
}

// RollupPoint is one bucket of a rollup series.
type RollupPoint struct {
	Start       time.Time // bucket start
	First, Last Point
}

// Rollup folds raw samples of every complete bucket since the last run into
// the minute and hour series, in one transaction: one commit a minute,
// not one per resolution (the hour's would be empty 59 minutes in 60, and
// a commit writes and syncs the meta page even then). The daemon calls it
// from its sampling loop, so it never races a tick's write; buckets are
// complete once now has passed their end.
func (db *DB) Rollup(now time.Time) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	err := db.update(func(tx *bolt.Tx) error {
		for _, res := range resolutions {
			if err := db.rollup(tx, res, now); err != nil {
				return fmt.Errorf("rollup %v: %w", res, err)
			}
		}
		return nil
	})
	if err != nil {
		clear(db.heads)
		return err
	}
	// Every resolution has seen the series up to here: forget those with
	// nothing newer.
	complete := completeBefore(resolutions[len(resolutions)-1], now)
	for key, last := range db.touched {
		if last < complete {
			delete(db.touched, key)
		}
	}
	return nil
}

// completeBefore is the start (ms) of res's bucket holding now: the
// buckets before it are complete.
func completeBefore(res Resolution, now time.Time) int64 {
	size := time.Duration(res).Milliseconds()
	return now.UnixMilli() / size * size
}

func (db *DB) rollup(tx *bolt.Tx, res Resolution, now time.Time) error {
	complete := completeBefore(res, now)
	meta := tx.Bucket(bucketMeta)
	from := int64(0)
	if v := meta.Get(res.watermarkKey()); len(v) == 8 {
		from = int64(binary.BigEndian.Uint64(v))
	}
	if from >= complete {
		return nil
	}
	head, chunks := tx.Bucket(bucketHead), tx.Bucket(bucketChunks)
	chunks.FillPercent = 1.0
	for key, last := range db.touched {
		if last < from {
			continue
		}
		if err := db.rollupSeries(tx, head, chunks, []byte(key), res, from, complete-1); err != nil {
			return err
		}
	}
	return meta.Put(res.watermarkKey(), binary.BigEndian.AppendUint64(nil, uint64(complete)))
}

// rollupSeries appends one rollup point per bucket of res that has raw
// samples of the raw series key in [fromMs, toMs].
func (db *DB) rollupSeries(tx *bolt.Tx, head, chunks *bolt.Bucket, key []byte, res Resolution, fromMs, toMs int64) error {
	size := time.Duration(res).Milliseconds()
	var points [][rollCols + 1]uint64 // bucket start, then the columns
	err := readSeries(tx, key, fromMs, toMs, func(t int64, v []uint64) {
		v = v[:min(len(v), statsColumns)] // the counters, without colCarried (a damaged chunk may have fewer)
		start := t / size * size
		n := len(points)
		if n == 0 || int64(points[n-1][0]) != start {
			var p [rollCols + 1]uint64
			p[0] = uint64(start)
			p[1] = uint64(t - start)
			copy(p[2:2+statsColumns], v)
			points = append(points, p)
			n++
		}
		p := &points[n-1]
		p[2+statsColumns] = uint64(t - start)
		copy(p[3+statsColumns:], v)
	})
	if err != nil {
		return err
	}
	rkey := append(key[:len(key)-1:len(key)-1], res.group())
	for _, p := range points {
		if err := db.appendSample(head, chunks, rkey, int64(p[0]), p[1:]); err != nil {
			return err
		}
	}
	return nil
}

// Rollups returns the instance's rollup points at res whose bucket starts
// in [from, to].
func (db *DB) Rollups(k InstanceKey, res Resolution, from, to time.Time) ([]RollupPoint, error) {
	var out []RollupPoint
	err := db.view(func(tx *bolt.Tx) error {
		return readSeries(tx, seriesKey(k, res.group()), from.UnixMilli(), to.UnixMilli(), func(t int64, v []uint64) {
			rp := RollupPoint{Start: time.UnixMilli(t)}
			rp.First.Time = time.UnixMilli(t + int64(v[0]))
			copy(rp.First.Values[:], v[1:1+statsColumns])
			rp.Last.Time = time.UnixMilli(t + int64(v[1+statsColumns]))
			copy(rp.Last.Values[:], v[2+statsColumns:])
			out = append(out, rp)
		})
	})
	return out, err
}

// RolledUpTo is the end of the last complete bucket folded into res: raw
// samples from here on are not in that rollup yet.
func (db *DB) RolledUpTo(res Resolution) (time.Time, error) {
	var t time.Time
	err := db.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(res.watermarkKey()); len(v) == 8 {
			t = time.UnixMilli(int64(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	return t, err
}
