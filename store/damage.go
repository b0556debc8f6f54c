package store

import (
	"context"
	"fmt"
	"os"
)

// DamageError is a store refused because it is damaged, or is no store at
// all. It matches ErrCorrupt.
type DamageError struct {
	Path string
	// Problems names each damaged item: a meta page, a page, a bucket, a
	// program's record.
	Problems []string
	// Unreadable: no sound meta page, so nothing in the file can be
	// found (empty, random bytes, not a bbolt file).
	Unreadable bool
}

func (e *DamageError) Error() string {
	what := "damaged"
	if e.Unreadable {
		what = "unreadable"
	}
	msg := fmt.Sprintf("store %s is %s: %s", e.Path, what, e.Problems[0])
	if n := len(e.Problems) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more %s)", n, plural(n, "problem", "problems"))
	}
	return msg
}

func (e *DamageError) Is(target error) bool { return target == ErrCorrupt }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// CheckFile proves the store file at path without opening it for writing:
// both meta pages with plain reads, then, in a child process bounded in
// time and memory, every page and (full) every record. It returns nil for
// a sound store, a *DamageError for a damaged or unreadable one, and
// ErrLocked when a running bpfperfd holds it. The file is not changed.
func CheckFile(ctx context.Context, path string, full bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &DamageError{Path: path, Unreadable: true, Problems: []string{"not a regular file"}}
	}
	if fi.Size() == 0 {
		return &DamageError{Path: path, Unreadable: true, Problems: []string{"file is empty"}}
	}
	metas := checkMetas(f, fi.Size())
	if !metas.readable {
		return &DamageError{Path: path, Unreadable: true, Problems: append([]string{"not a bbolt store (no sound meta page)"}, metas.problems...)}
	}
	if len(metas.problems) > 0 {
		// Walking from the older meta page would judge a state the
		// store no longer claims: the damage is the finding.
		return &DamageError{Path: path, Problems: metas.problems}
	}
	mode := "pages"
	if full {
		mode = "full"
	}
	problems, err := proveInChild(ctx, path, fi.Size(), mode)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return &DamageError{Path: path, Problems: problems}
	}
	return nil
}
