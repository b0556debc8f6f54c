package store

import (
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Counts is what the store holds, in the few figures status shows.
type Counts struct {
	Programs     int   // program instances, loaded or not
	Profiles     int   // stored CPU profiles
	ProfileBytes int64 // their size
	// At is when they were counted.
	At time.Time
	// Unanswered is how long the count in flight has waited for the
	// store, when it did not answer within Counts' wait: the figures are
	// then the last ones counted. Zero when they are fresh.
	Unanswered time.Duration
}

// counter runs one count at a time, in a goroutine of its own.
type counter struct {
	mu      sync.Mutex
	last    Counts
	started time.Time     // of the count in flight
	done    chan struct{} // closed when it ends; nil when none runs
}

// Counts counts the store's programs and profiles, waiting at most wait
// for the store to answer.
//
// A read waits for bbolt's meta lock, which a write holds while it writes
// the meta page: a write stuck in the kernel there (a frozen or hung disk)
// stops every read until it ends. Status must answer then, most of all to
// say that the sampler stalled, so past wait this gives the last counts
// and how long the store has not answered, while the count goes on alone.
// Only one count runs at a time: callers during a stuck write do not pile
// up goroutines.
func (db *DB) Counts(wait time.Duration) Counts {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	asked := time.Now()
	c := &db.counter
	for {
		c.mu.Lock()
		if c.done == nil {
			c.started, c.done = time.Now(), make(chan struct{})
			go db.count(c.done)
		}
		done, started := c.done, c.started
		c.mu.Unlock()
		select {
		case <-done:
			if !started.Before(asked) {
				return db.lastCounts(0)
			}
			// A count from before the call: it may miss a write the
			// caller made just before asking. Count again.
		case <-deadline.C:
			return db.lastCounts(time.Since(started))
		}
	}
}

func (db *DB) lastCounts(unanswered time.Duration) Counts {
	db.counter.mu.Lock()
	defer db.counter.mu.Unlock()
	n := db.counter.last
	n.Unanswered = unanswered
	return n
}

// count counts in one read transaction and closes done.
func (db *DB) count(done chan struct{}) {
	n := Counts{At: time.Now()}
	err := db.view(func(tx *bolt.Tx) error {
		n.Programs = tx.Bucket(bucketPrograms).Stats().KeyN
		return tx.Bucket(bucketProfiles).ForEach(func(k, v []byte) error {
			n.Profiles++
			n.ProfileBytes += int64(len(v))
			return nil
		})
	})
	c := &db.counter
	c.mu.Lock()
	if err == nil {
		c.last = n
	}
	c.done = nil
	c.mu.Unlock()
	close(done)
}
