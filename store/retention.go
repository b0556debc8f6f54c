package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Retention says how long each resolution is kept.
type Retention struct {
	Raw    time.Duration // raw samples (default 7 days)
	Minute time.Duration // minute rollups (default DefaultMinuteDays)
	Rollup time.Duration // hour rollups, events, unloaded programs (default 400 days)
}

// DefaultMinuteDays is how many days minute rollups are kept by default. A
// minute point of a busy program costs about 12 bytes (first and last
// counters of the minute); a year of them for 1,000 programs would be
// several GiB, so minutes are kept a month and hours for the long run.
const DefaultMinuteDays = 35

// Expired counts what one Expire call deleted.
type Expired struct {
	Chunks, Programs, Events int
}

const (
	// expireBatch bounds one delete transaction, so a tick's write never
	// waits long behind retention.
	expireBatch = 500
	// expireMax bounds the keys one Expire call collects; the next call
	// continues where it left off.
	expireMax = 100_000
)

// Expire deletes data older than the retention: sealed and open chunks
// whose last sample is older than their resolution's cutoff, program
// records with no data left that were unloaded before the rollup cutoff,
// and old events. It reads in one transaction and deletes in small ones.
// bbolt reuses the freed pages.
func (db *DB) Expire(now time.Time, keep Retention) (Expired, error) {
	var out Expired
	cutoff := map[byte]int64{
		groupStats:    now.Add(-keep.Raw).UnixMilli(),
		groupCounters: now.Add(-keep.Raw).UnixMilli(),
		// Latency windows are few and are what a regression's tail is
		// judged on: kept as long as the rollups.
		groupLatency:   now.Add(-keep.Rollup).UnixMilli(),
		Minute.group(): now.Add(-cmp.Or(keep.Minute, keep.Rollup)).UnixMilli(),
		Hour.group():   now.Add(-keep.Rollup).UnixMilli(),
	}
	var chunks, heads, progs, events [][]byte
	err := db.view(func(tx *bolt.Tx) error {
		// Sealed chunks of one series sort by start time, so chunk i ends
		// before chunk i+1 (or the open chunk) starts.
		c := tx.Bucket(bucketChunks).Cursor()
		head := tx.Bucket(bucketHead)
		for k, v := c.First(); k != nil && len(chunks) < expireMax; {
			series := k[:len(k)-8]
			limit, ok := cutoff[series[len(series)-1]]
			if !ok {
				return fmt.Errorf("%w: chunk key %x", ErrCorrupt, k)
			}
			nk, nv := c.Next()
			var nextStart int64
			switch {
			case nk != nil && bytes.HasPrefix(nk, series) && len(nk) == len(k):
				nextStart = int64(binary.BigEndian.Uint64(nk[len(series):]))
			case head.Get(series) != nil:
				hc, err := decodeChunk(head.Get(series), nil)
				if err != nil {
					return fmt.Errorf("%w: open chunk %x: %v", ErrCorrupt, series, err)
				}
				nextStart = hc.t0
			default:
				_, ch, err := decodeSealed(v, nil)
				if err != nil {
					return fmt.Errorf("%w: chunk %x: %v", ErrCorrupt, k, err)
				}
				nextStart = ch.lastT + 1
			}
			if nextStart <= limit {
				chunks = append(chunks, bytes.Clone(k))
			}
			k, v = nk, nv
		}
		err := head.ForEach(func(k, v []byte) error {
			limit, ok := cutoff[k[len(k)-1]]
			if !ok {
				return fmt.Errorf("%w: open chunk key %x", ErrCorrupt, k)
			}
			hc, err := decodeChunk(v, nil)
			if err != nil {
				return fmt.Errorf("%w: open chunk %x: %v", ErrCorrupt, k, err)
			}
			if hc.lastT < limit {
				heads = append(heads, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketPrograms).ForEach(func(k, v []byte) error {
			var p Program
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("%w: program record %x: %v", ErrCorrupt, k, err)
			}
			if !p.UnloadedAt.IsZero() && p.UnloadedAt.UnixMilli() < cutoff[Minute.group()] {
				progs = append(progs, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		ec := tx.Bucket(bucketEvents).Cursor()
		for k, _ := ec.First(); k != nil && len(events) < expireMax; k, _ = ec.Next() {
			if int64(binary.BigEndian.Uint64(k)) >= now.Add(-keep.Rollup).UnixNano() {
				break
			}
			events = append(events, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("expire: %w", err)
	}
	for _, job := range []struct {
		bucket []byte
		keys   [][]byte
		count  *int
	}{
		{bucketChunks, chunks, &out.Chunks},
		{bucketHead, heads, &out.Chunks},
		{bucketPrograms, progs, &out.Programs},
		{bucketEvents, events, &out.Events},
	} {
		n, err := db.deleteInBatches(job.bucket, job.keys, expireBatch)
		*job.count += n
		if err != nil {
			return out, fmt.Errorf("expire: %w", err)
		}
	}
	return out, nil
}

// deleteInBatches deletes keys from bucket, batch keys per transaction, and
// returns how many it deleted.
func (db *DB) deleteInBatches(bucket []byte, keys [][]byte, batch int) (int, error) {
	n := 0
	for len(keys) > 0 {
		k := min(len(keys), batch)
		if err := db.deleteKeys(bucket, keys[:k]); err != nil {
			return n, err
		}
		n += k
		keys = keys[k:]
	}
	return n, nil
}

func (db *DB) deleteKeys(bucket []byte, keys [][]byte) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if bytes.Equal(bucket, bucketHead) {
		for _, k := range keys {
			delete(db.heads, string(k))
		}
	}
	return err
}
