package store

import (
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// bbolt reads pages through mmap and trusts them: a corrupt page panics and
// a truncated file faults. Both become ErrCorrupt here instead of taking the
// daemon down. SetPanicOnFault turns the fault into a recoverable panic for
// this goroutine only.
func guard(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: %s", ErrCorrupt, panicFinding(fmt.Sprint(p)))
	}
}

var pageSaysOther = regexp.MustCompile(`Page expected to be: (\d+), but self identifies as (\d+)`)

// panicFinding words what a recovered bbolt panic says about the file,
// without Go's runtime text.
func panicFinding(msg string) string {
	if m := pageSaysOther.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("page %s is damaged (its header says page %s)", m[1], m[2])
	}
	if strings.Contains(msg, "runtime error") || strings.Contains(msg, "fault") {
		return crashFinding(msg)
	}
	return strings.TrimPrefix(msg, "assertion failed: ")
}

// view and update note what they find damaged (running_damage.go); once
// something is, update writes nothing more.
func (db *DB) view(fn func(tx *bolt.Tx) error) (err error) {
	defer func() { db.noteDamage(err) }()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(&err)
	return db.bolt.View(fn)
}

// update is bbolt's Update but for what it does on damage. bbolt rolls a
// failed write transaction back by rebuilding its free list (we do not
// write it: NoFreelistSync) from a walk of every page, in a goroutine of
// its own, where a damaged page is a crash no recover can catch. So a
// transaction that hit damage is abandoned, not rolled back: nothing it
// changed reaches the file, and the writer lock it keeps is never asked
// for again, as writes stop for good (writeMu makes sure no writer is
// already waiting for it).
func (db *DB) update(fn func(tx *bolt.Tx) error) (err error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if err := db.writesStopped(); err != nil {
		return err
	}
	defer func() { db.noteDamage(err) }()
	tx, err := db.bolt.Begin(true)
	if err != nil {
		return err
	}
	if err = guarded(func() error { return fn(tx) }); err == nil {
		err = guarded(tx.Commit)
		if errors.Is(err, ErrCorrupt) {
			db.abandoned.Store(true)
		}
		return err
	}
	if errors.Is(err, ErrCorrupt) {
		db.abandoned.Store(true)
		return err
	}
	tx.Rollback()
	return err
}

func guarded(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(&err)
	return fn()
}
