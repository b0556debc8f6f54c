package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BPF maps: a record per map instance (boot, map id) and one series per
// map of its memory and entries, in buckets of their own so the program
// series' rollups, retention and checks never see them. The buckets are
// created by the first write: a store without maps reads as having none,
// and an older bpfperf ignores them.
var (
	bucketMaps      = []byte("maps")       // MapRecord JSON by (boot, map id)
	bucketMapHead   = []byte("map_head")   // each map series' open chunk
	bucketMapChunks = []byte("map_chunks") // sealed chunks, by series and start
)

// groupMaps marks map series keys, so they never share the chunk cache's
// key with a program series of the same id.
const groupMaps = 0x10

// Columns of a map series.
const (
	MapColMemlock = iota // bytes, the kernel's memlock figure
	MapColEntries        // entries + 1; 0: not counted
	mapColumns
)

// MapRecord is what the store keeps of one map instance.
type MapRecord struct {
	Key        InstanceKey `json:"-"`
	BootID     string      `json:"boot_id"`
	ID         uint32      `json:"id"`
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	KeySize    uint32      `json:"bytes_key"`
	ValueSize  uint32      `json:"bytes_value"`
	MaxEntries uint32      `json:"max_entries"`
	FirstSeen  time.Time   `json:"first_seen"`
	GoneAt     time.Time   `json:"gone_at,omitzero"`
	// Owners is who held the map when it was last seen (JSON of the
	// daemon's owner list), kept for owners' history.
	Owners json.RawMessage `json:"owners,omitempty"`
}

// MapSample is one reading of one map.
type MapSample struct {
	Key     InstanceKey
	Memlock uint64
	Entries int64 // -1: not counted
}

// MapPoint is one stored reading of a map.
type MapPoint struct {
	Time    time.Time
	Memlock uint64
	Entries int64 // -1: not counted
}

// MapTick is what one reading of every map writes, in one transaction.
type MapTick struct {
	Time    time.Time
	Seen    []MapRecord   // first seen, or their owners changed: put as given
	Gone    []InstanceKey // gone since the last reading
	Samples []MapSample
	Events  []Event
}

// WriteMaps stores one reading of the maps: all or nothing.
func (db *DB) WriteMaps(t MapTick) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ms := t.Time.UnixMilli()
	err := db.update(func(tx *bolt.Tx) error {
		if err := createBuckets(tx, bucketMaps, bucketMapHead, bucketMapChunks); err != nil {
			return err
		}
		recs, head, chunks := tx.Bucket(bucketMaps), tx.Bucket(bucketMapHead), tx.Bucket(bucketMapChunks)
		for _, r := range t.Seen {
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := recs.Put(r.Key.bytes(), v); err != nil {
				return err
			}
		}
		chunks.FillPercent = 1.0
		for _, s := range t.Samples {
			v := []uint64{s.Memlock, uint64(s.Entries + 1)}
			if err := db.appendSample(head, chunks, seriesKey(s.Key, groupMaps), ms, v); err != nil {
				return err
			}
		}
		for _, k := range t.Gone {
			if err := markMapGone(recs, k, t.Time); err != nil {
				return err
			}
			if err := db.seal(head, chunks, seriesKey(k, groupMaps)); err != nil {
				return err
			}
		}
		return putEvents(tx, t.Events)
	})
	if err != nil {
		clear(db.heads) // see WriteTicks
		return fmt.Errorf("write maps: %w", err)
	}
	return nil
}

func markMapGone(recs *bolt.Bucket, k InstanceKey, at time.Time) error {
	v := recs.Get(k.bytes())
	if v == nil {
		return nil
	}
	var r MapRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return fmt.Errorf("%w: map %d: %v", ErrCorrupt, k.ID, err)
	}
	r.GoneAt = at
	nv, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return recs.Put(k.bytes(), nv)
}

// Maps returns every map instance the store knows, present or gone.
func (db *DB) Maps() ([]MapRecord, error) {
	var out []MapRecord
	err := db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMaps)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r MapRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("%w: map record %x: %v", ErrCorrupt, k, err)
			}
			r.Key = instanceKeyFrom(k)
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// MapSeries returns a map's readings with from <= time <= to, oldest
// first.
func (db *DB) MapSeries(k InstanceKey, from, to time.Time) ([]MapPoint, error) {
	var out []MapPoint
	err := db.view(func(tx *bolt.Tx) error {
		head, chunks := tx.Bucket(bucketMapHead), tx.Bucket(bucketMapChunks)
		if head == nil || chunks == nil {
			return nil
		}
		return readSeriesIn(head, chunks, seriesKey(k, groupMaps), from.UnixMilli(), to.UnixMilli(), func(t int64, v []uint64) {
			if len(v) == mapColumns {
				out = append(out, MapPoint{Time: time.UnixMilli(t), Memlock: v[MapColMemlock], Entries: int64(v[MapColEntries]) - 1})
			}
		})
	})
	return out, err
}

// ExpireMaps deletes map readings older than keep before now: sealed
// chunks that end before the cutoff, and the records (with their open
// chunk) of maps gone before it. It returns how many chunks and records
// it deleted.
func (db *DB) ExpireMaps(now time.Time, keep time.Duration) (int, error) {
	cutoff := now.Add(-keep)
	db.mu.Lock()
	defer db.mu.Unlock()
	n := 0
	err := db.update(func(tx *bolt.Tx) error {
		recs, head, chunks := tx.Bucket(bucketMaps), tx.Bucket(bucketMapHead), tx.Bucket(bucketMapChunks)
		if recs == nil || head == nil || chunks == nil {
			return nil
		}
		var dead [][]byte
		err := chunks.ForEach(func(k, v []byte) error {
			if int64(binary.BigEndian.Uint64(k[len(k)-8:])) >= cutoff.UnixMilli() {
				return nil
			}
			_, last, err := decodeSealed(v, nil)
			if err != nil {
				return fmt.Errorf("%w: map chunk %x: %v", ErrCorrupt, k, err)
			}
			if last.lastT < cutoff.UnixMilli() {
				dead = append(dead, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		var gone [][]byte
		err = recs.ForEach(func(k, v []byte) error {
			var r MapRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("%w: map record %x: %v", ErrCorrupt, k, err)
			}
			if !r.GoneAt.IsZero() && r.GoneAt.Before(cutoff) {
				gone = append(gone, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range dead {
			if err := chunks.Delete(k); err != nil {
				return err
			}
		}
		for _, k := range gone {
			sk := seriesKey(instanceKeyFrom(k), groupMaps)
			delete(db.heads, string(sk))
			if err := head.Delete(sk); err != nil {
				return err
			}
			if err := recs.Delete(k); err != nil {
				return err
			}
		}
		n = len(dead) + len(gone)
		return nil
	})
	if err != nil {
		clear(db.heads)
		return 0, fmt.Errorf("expire maps: %w", err)
	}
	return n, nil
}
