package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Compact rewrites the store file at path into a fresh file without free
// pages and swaps it in, returning the sizes before and after. It needs the
// file to itself: it fails with ErrLocked while a daemon has it open. The
// original stays untouched until the copy is complete and synced, so an
// interruption loses nothing.
func Compact(path string) (before, after int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return 0, 0, fmt.Errorf("compact %s: %w", path, ErrLocked)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w: %v", path, ErrCorrupt, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	if err := bolt.Compact(dst, src, 64<<20); err != nil {
		dst.Close()
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	dst.Close()
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	// The rename is durable once the directory is: until then a power
	// cut could bring back the old file (whole, which loses nothing).
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		dir.Sync()
		dir.Close()
	}
	nfi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), nfi.Size(), nil
}
