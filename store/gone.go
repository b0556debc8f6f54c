package store

import (
	"errors"
	"io/fs"
	"os"
)

// Gone says, in a few words, when the store's path no longer names the
// file this DB has open: it was removed (with its directory, say), or
// replaced by another file. Writes still go to the open file, which is
// lost when the daemon closes it; "" while the path is the open file.
// Checking costs one stat of the path, compared with the one taken at
// Open.
func (db *DB) Gone() string {
	if db.opened == nil {
		return ""
	}
	now, err := os.Stat(db.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the store file was removed while open"
	case err != nil:
		return "the store file cannot be found: " + err.Error()
	case !os.SameFile(db.opened, now):
		return "the store file was replaced by another file while open"
	}
	return ""
}
