package store

import (
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// bbolt reads pages through mmap and trusts them: a corrupt page panics and
// a truncated file faults. Both become ErrCorrupt here instead of taking the
// daemon down. SetPanicOnFault turns the fault into a recoverable panic for
// this goroutine only.
func guard(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: %v", ErrCorrupt, p)
	}
}

func (db *DB) view(fn func(tx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(&err)
	return db.bolt.View(fn)
}

func (db *DB) update(fn func(tx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(&err)
	return db.bolt.Update(fn)
}
