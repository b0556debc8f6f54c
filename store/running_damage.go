package store

import (
	"errors"
	"fmt"
)

// ErrWritesStopped: the store was found damaged while running, so nothing
// more is written to it. It matches ErrCorrupt.
var ErrWritesStopped = fmt.Errorf("%w: writes to it are stopped", ErrCorrupt)

// Damage found while the daemon runs (a read that hits a damaged page or
// record) stops all writes to the file: writing on top of a damaged tree
// can spread the damage, and the file is what `store salvage` reads.
// Reads still go on; what they cannot read says so.

// Damaged says what was found damaged while running, "" while sound.
func (db *DB) Damaged() string {
	if d := db.damaged.Load(); d != nil {
		return *d
	}
	return ""
}

// OnDamage sets fn to be called once, when damage is first found.
func (db *DB) OnDamage(fn func(what string)) { db.onDamage = fn }

// noteDamage records err if it is damage; the first one stops writes.
func (db *DB) noteDamage(err error) {
	if err == nil || !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrWritesStopped) {
		return
	}
	what := err.Error()
	if db.damaged.CompareAndSwap(nil, &what) && db.onDamage != nil {
		db.onDamage(what)
	}
}

// writesStopped is the error a write gets once damage was found.
func (db *DB) writesStopped() error {
	if d := db.damaged.Load(); d != nil {
		return fmt.Errorf("%w (%s)", ErrWritesStopped, *d)
	}
	return nil
}
