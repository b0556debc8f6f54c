package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// mergePeriod is how much history of one series goes into one segment, per
// group: a day of raw samples is a few hundred KB, a week of minute rollups
// or a quarter of hour rollups about the same.
var mergePeriod = map[byte]time.Duration{
	groupStats:     24 * time.Hour,
	groupCounters:  24 * time.Hour,
	groupLatency:   30 * 24 * time.Hour, // a window every few minutes at most
	Minute.group(): 7 * 24 * time.Hour,
	Hour.group():   90 * 24 * time.Hour,
}

const (
	// mergeBatch bounds the segments one transaction writes.
	mergeBatch = 20
	// mergeMax bounds the segments one Merge call builds.
	mergeMax = 5000
)

type mergeJob struct {
	keys [][]byte // sealed values to merge, in time order; the first key is kept
}

// Merge packs the sealed chunks of every complete period (a day of raw
// samples, a week of minute rollups, ...) into one segment per series and
// period. Reads are unchanged; the file stops growing half-full leaf pages
// of small values. It works in small transactions and returns how many
// segments it wrote.
func (db *DB) Merge(now time.Time) (int, error) {
	var jobs []mergeJob
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChunks).Cursor()
		var cur mergeJob
		var curSeries []byte
		curPeriod := int64(-1)
		flush := func() {
			if len(cur.keys) > 1 {
				jobs = append(jobs, cur)
			}
			cur = mergeJob{}
		}
		for k, _ := c.First(); k != nil && len(jobs) < mergeMax; k, _ = c.Next() {
			if len(k) != 17 {
				return fmt.Errorf("%w: chunk key %x", ErrCorrupt, k)
			}
			series, start := k[:9], int64(binary.BigEndian.Uint64(k[9:]))
			period, ok := mergePeriod[series[8]]
			if !ok {
				return fmt.Errorf("%w: chunk key %x", ErrCorrupt, k)
			}
			p := start / period.Milliseconds()
			if !bytes.Equal(series, curSeries) || p != curPeriod {
				flush()
				curSeries, curPeriod = append(curSeries[:0], series...), p
			}
			// Only complete periods: the current one still gets chunks.
			if (p+1)*period.Milliseconds() <= now.UnixMilli() {
				cur.keys = append(cur.keys, bytes.Clone(k))
			}
		}
		flush()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("merge: %w", err)
	}
	done := 0
	for len(jobs) > 0 {
		n := min(len(jobs), mergeBatch)
		if err := db.merge(jobs[:n]); err != nil {
			return done, fmt.Errorf("merge: %w", err)
		}
		done += n
		jobs = jobs[n:]
	}
	return done, nil
}

func (db *DB) merge(jobs []mergeJob) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChunks)
		for _, j := range jobs {
			var seg []byte
			for _, k := range j.keys {
				v := b.Get(k)
				if v == nil {
					return fmt.Errorf("chunk %x vanished", k) // expired meanwhile: retry next time
				}
				seg = appendToSegment(seg, v)
			}
			if _, _, err := decodeSealed(seg, nil); err != nil {
				return fmt.Errorf("%w: segment of %x: %v", ErrCorrupt, j.keys[0], err)
			}
			for _, k := range j.keys[1:] {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			if err := b.Put(j.keys[0], seg); err != nil {
				return err
			}
		}
		return nil
	})
}
