package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// LastEventBefore returns the newest event of one of kinds with a time
// before t, or nil: what state a range starting at t begins in (a daemon
// run, its settings). It walks back from t, so it reads the events
// between t and the one it finds.
func (db *DB) LastEventBefore(t time.Time, kinds ...string) (*Event, error) {
	var found *Event
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		k, v := c.Seek(binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("%w: event %x: %v", ErrCorrupt, k, err)
			}
			if slices.Contains(kinds, e.Kind) && e.Time.Before(t) {
				found = &e
				return nil
			}
		}
		return nil
	})
	return found, err
}
