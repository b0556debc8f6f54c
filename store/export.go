package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// ExportRow is one raw sample with its program's identity.
type ExportRow struct {
	Program Program
	Point   Point
}

// Export calls fn for every raw sample in [from, to], program by program
// (in store order), each program in time order. Each program is read in its
// own short transaction, so memory stays bounded by one program's window and
// a slow reader does not hold the store.
func (db *DB) Export(from, to time.Time, fn func(ExportRow) error) error {
	progs, err := db.Programs()
	if err != nil {
		return err
	}
	fromMs, toMs := from.UnixMilli(), to.UnixMilli()
	for _, p := range progs {
		var rows []ExportRow
		err := db.view(func(tx *bolt.Tx) error {
			return readSeries(tx, seriesKey(p.Key, groupStats), fromMs, toMs, func(t int64, v []uint64) {
				r := ExportRow{Program: p, Point: Point{Time: time.UnixMilli(t)}}
				copy(r.Point.Values[:], v)
				rows = append(rows, r)
			})
		})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}
