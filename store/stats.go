package store

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// GroupStats sizes one resolution's series.
type GroupStats struct {
	Series  int   `json:"series"`
	Chunks  int   `json:"chunks"`
	Samples int64 `json:"samples"`
	Bytes   int64 `json:"bytes"` // chunk payload, without bbolt's keys and pages
}

// BytesPerSample is chunk bytes per (series, counter, timestamp) sample,
// for samples of columns counters; 0 without samples.
func (g GroupStats) BytesPerSample(columns int) float64 {
	if g.Samples == 0 || columns <= 0 {
		return 0
	}
	return float64(g.Bytes) / float64(g.Samples*int64(columns))
}

// Stats describes what the store holds.
type Stats struct {
	Path      string                `json:"path"`
	FileBytes int64                 `json:"file_bytes"`
	Schema    int                   `json:"schema"`
	Programs  int                   `json:"programs"`
	Events    int                   `json:"events"`
	Groups    map[string]GroupStats `json:"resolutions"` // "raw", "1m0s", "1h0m0s", "counters"
	Oldest    time.Time             `json:"oldest_sample,omitzero"`
	Newest    time.Time             `json:"newest_sample,omitzero"`
}

// Stats counts series, chunks, samples and bytes per resolution. It reads
// chunk headers, not whole chunks, except the newest chunk of each series.
func (db *DB) Stats() (Stats, error) {
	st := Stats{Path: db.path, FileBytes: db.Size(), Schema: SchemaVersion, Groups: map[string]GroupStats{}}
	name := map[byte]string{groupStats: Raw.String(), Minute.group(): Minute.String(), Hour.group(): Hour.String(), groupCounters: "counters", groupLatency: "latency"}
	oldest, newest := int64(-1), int64(-1)
	note := func(first, last int64) {
		if oldest < 0 || first < oldest {
			oldest = first
		}
		newest = max(newest, last)
	}
	err := db.view(func(tx *bolt.Tx) error {
		st.Programs = tx.Bucket(bucketPrograms).Stats().KeyN
		st.Events = tx.Bucket(bucketEvents).Stats().KeyN
		head := tx.Bucket(bucketHead)
		add := func(group byte, v []byte, newSeries bool) error {
			g, ok := name[group]
			if !ok {
				return fmt.Errorf("%w: bad chunk in group %d", ErrCorrupt, group)
			}
			gs := st.Groups[g]
			err := sealedChunks(v, func(c []byte) error {
				n, _ := binary.Uvarint(c)
				if n == 0 {
					return errCorruptChunk
				}
				gs.Chunks++
				gs.Samples += int64(n)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%w: bad chunk in group %d: %v", ErrCorrupt, group, err)
			}
			gs.Bytes += int64(len(v))
			if newSeries {
				gs.Series++
			}
			st.Groups[g] = gs
			return nil
		}
		// The newest sealed chunk of a raw series without an open chunk
		// holds its newest sample: decode that one when the series ends.
		var prev, prevLast []byte
		endSeries := func() error {
			if prev == nil || prev[len(prev)-1] != groupStats || head.Get(prev) != nil {
				return nil
			}
			_, ch, err := decodeSealed(prevLast, nil)
			if err != nil {
				return fmt.Errorf("%w: chunk of %x: %v", ErrCorrupt, prev, err)
			}
			note(ch.t0, ch.lastT)
			return nil
		}
		c := tx.Bucket(bucketChunks).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			series := k[:len(k)-8]
			isNew := prev == nil || string(prev) != string(series)
			if isNew {
				if err := endSeries(); err != nil {
					return err
				}
			}
			if err := add(series[len(series)-1], v, isNew && head.Get(series) == nil); err != nil {
				return err
			}
			if series[len(series)-1] == groupStats {
				start := int64(binary.BigEndian.Uint64(k[len(series):]))
				note(start, start)
			}
			prev = append(prev[:0], series...)
			prevLast = append(prevLast[:0], v...)
		}
		if err := endSeries(); err != nil {
			return err
		}
		return head.ForEach(func(k, v []byte) error {
			if err := add(k[len(k)-1], v, true); err != nil {
				return err
			}
			if k[len(k)-1] == groupStats {
				ch, err := decodeChunk(v, nil)
				if err != nil {
					return fmt.Errorf("%w: open chunk %x: %v", ErrCorrupt, k, err)
				}
				note(ch.t0, ch.lastT)
			}
			return nil
		})
	})
	if oldest >= 0 {
		st.Oldest, st.Newest = time.UnixMilli(oldest), time.UnixMilli(newest)
	}
	return st, err
}

// IdleHeartbeat says whether tick is the one, out of every `every`, at
// which an unchanged series is stored anyway. Programs are spread by id
// over a few ticks of each period (heartbeatSlots), not over all of them:
// most ticks of a host whose programs are idle then write nothing, and a
// tick with nothing to write costs no transaction (WriteTicks), while no
// single tick writes every idle program. They are spread in blocks of
// heartbeatBlock consecutive ids, not id by id: series are keyed by id,
// so a block's heads sit together in the file's pages, and a commit
// rewrites every page it touched. Spread id by id, each of the six ticks
// touched nearly every page of the heads; in blocks, about a sixth.
func IdleHeartbeat(tick uint64, id uint32, every uint64) bool {
	every = max(every, 1)
	slots := min(every, heartbeatSlots)
	return tick%every == uint64(id/heartbeatBlock)%slots*(every/slots)
}

// heartbeatBlock is how many consecutive ids share a heartbeat tick. Each
// tick that stores some costs a commit, two fdatasyncs, and a run of Go's
// monitor thread's polls while they block; blocks of 2,048 put a host's
// thousand idle programs in one or two of them, and 10,000 still in five.
const heartbeatBlock = 2048

// HeartbeatTick says whether any program's heartbeat falls on tick (see
// IdleHeartbeat): a few ticks of each period, so a sampler that does not
// read idle programs every tick looks for them only then.
func HeartbeatTick(tick, every uint64) bool {
	every = max(every, 1)
	slots := min(every, heartbeatSlots)
	step := every / slots
	r := tick % every
	return r%step == 0 && r/step < slots
}

// heartbeatSlots is how many ticks of each heartbeat period store idle
// programs.
const heartbeatSlots = 6
