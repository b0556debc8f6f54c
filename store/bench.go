package store

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Benchmark runs handed over by `bpfperf bench --store`. Each run is one
// key in the bench bucket: big-endian run time (unix ns) then the bucket's
// sequence number, which is the run's id. The value is a header the listing
// reads alone, then the report as received, gzipped when large:
//
//	uvarint len(header JSON) | header JSON | encoding byte | report

// ErrUnknownBenchRun: no stored run has that id (or it expired).
var ErrUnknownBenchRun = errors.New("unknown bench run")

// BenchRun is what the store keeps beside a run's report, for listing.
type BenchRun struct {
	ID     uint64    `json:"id"`
	Time   time.Time `json:"time"`   // when the run started
	Stored time.Time `json:"stored"` // when the daemon received it
	Tests  int       `json:"tests"`  // results in the report, skipped and failed included
	Failed int       `json:"failed"`
	Kernel string    `json:"kernel"`
	Commit string    `json:"git_commit,omitempty"`
	Label  string    `json:"label,omitempty"`
	// Bytes is the report's size as received; Stored bytes may be fewer.
	Bytes int `json:"bytes"`
}

const (
	benchPlain byte = 0
	benchGzip  byte = 1
	// benchCompressOver: reports above this are gzipped (a full suite's
	// JSON, measurements included, shrinks about 4x).
	benchCompressOver = 4 << 10
)

func benchKey(t time.Time, id uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())), id)
}

// PutBenchRun stores a run's report and, in the same transaction, a
// "bench_run" event so it shows among the events. run.ID is assigned here;
// the stored run is returned.
func (db *DB) PutBenchRun(run BenchRun, report []byte) (BenchRun, error) {
	if run.Time.IsZero() || run.Time.UnixNano() < 0 {
		return run, fmt.Errorf("store bench run: time %v is out of range", run.Time)
	}
	if run.Stored.IsZero() {
		run.Stored = time.Now()
	}
	run.Bytes = len(report)
	enc, body := benchPlain, report
	if len(report) > benchCompressOver {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(report); err != nil {
			return run, err
		}
		if err := zw.Close(); err != nil {
			return run, err
		}
		enc, body = benchGzip, buf.Bytes()
	}
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBench)
		b.FillPercent = 1.0 // runs arrive in time order, near enough
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		run.ID = seq
		header, err := json.Marshal(run)
		if err != nil {
			return err
		}
		v := binary.AppendUvarint(make([]byte, 0, len(header)+len(body)+11), uint64(len(header)))
		v = append(append(append(v, header...), enc), body...)
		if err := b.Put(benchKey(run.Time, seq), v); err != nil {
			return err
		}
		return putEvents(tx, []Event{{Time: run.Time, Kind: "bench_run", Detail: run.describe()}})
	})
	if err != nil {
		return run, fmt.Errorf("store bench run: %w", err)
	}
	return run, nil
}

// describe is the event's detail: "run 4: 12 tests, 1 failed, commit abc, LABEL".
func (r BenchRun) describe() string {
	s := fmt.Sprintf("run %d: %d tests", r.ID, r.Tests)
	if r.Tests == 1 {
		s = fmt.Sprintf("run %d: 1 test", r.ID)
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d failed", r.Failed)
	}
	if r.Commit != "" {
		s += ", commit " + r.Commit
	}
	if r.Label != "" {
		s += ", " + r.Label
	}
	return s
}

// splitBenchValue cuts a stored value into its header and encoded report.
// The slices alias v.
func splitBenchValue(k, v []byte) (header []byte, enc byte, body []byte, err error) {
	n, size := binary.Uvarint(v)
	if size <= 0 || n >= uint64(len(v)-size) {
		return nil, 0, nil, fmt.Errorf("%w: bench run %x: bad header", ErrCorrupt, k)
	}
	header = v[size : size+int(n)]
	rest := v[size+int(n):]
	return header, rest[0], rest[1:], nil
}

func decodeBenchRun(k, v []byte) (BenchRun, error) {
	var r BenchRun
	header, _, _, err := splitBenchValue(k, v)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(header, &r); err != nil {
		return r, fmt.Errorf("%w: bench run %x: %v", ErrCorrupt, k, err)
	}
	return r, nil
}

// ListBenchRuns returns the runs with from <= time <= to, oldest first.
func (db *DB) ListBenchRuns(from, to time.Time) ([]BenchRun, error) {
	var out []BenchRun
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBench).Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, uint64(max(from.UnixNano(), 0)))); k != nil; k, v = c.Next() {
			if len(k) != 16 {
				return fmt.Errorf("%w: bench run key %x", ErrCorrupt, k)
			}
			if int64(binary.BigEndian.Uint64(k)) > to.UnixNano() {
				break
			}
			r, err := decodeBenchRun(k, v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// GetBenchRun returns a run and its report as it was received.
func (db *DB) GetBenchRun(id uint64) (BenchRun, []byte, error) {
	var run BenchRun
	var enc byte
	var body []byte
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBench).Cursor()
		// Keys sort by time; the id is their tail. Runs are few (one per
		// CI job or so), so a key scan is cheap and needs no index.
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if len(k) != 16 || binary.BigEndian.Uint64(k[8:]) != id {
				continue
			}
			r, err := decodeBenchRun(k, v)
			if err != nil {
				return err
			}
			_, e, b, err := splitBenchValue(k, v)
			if err != nil {
				return err
			}
			run, enc, body = r, e, bytes.Clone(b)
			return nil
		}
		return fmt.Errorf("%w %d", ErrUnknownBenchRun, id)
	})
	if err != nil {
		return run, nil, err
	}
	switch enc {
	case benchPlain:
		return run, body, nil
	case benchGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return run, nil, fmt.Errorf("%w: bench run %d: %v", ErrCorrupt, id, err)
		}
		report, err := io.ReadAll(zr)
		if err != nil {
			return run, nil, fmt.Errorf("%w: bench run %d: %v", ErrCorrupt, id, err)
		}
		return run, report, nil
	}
	return run, nil, fmt.Errorf("%w: bench run %d: encoding %d", ErrCorrupt, id, enc)
}

// ExpireBench deletes runs that started before now - keep.Rollup (runs are
// kept as long as events), reading in one transaction and deleting in small
// ones. It returns how many it deleted.
func (db *DB) ExpireBench(now time.Time, keep Retention) (int, error) {
	cutoff := now.Add(-keep.Rollup).UnixNano()
	var keys [][]byte
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBench).Cursor()
		for k, _ := c.First(); k != nil && len(keys) < expireMax; k, _ = c.Next() {
			if len(k) >= 8 && int64(binary.BigEndian.Uint64(k)) >= cutoff {
				break
			}
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire bench runs: %w", err)
	}
	// Reports can be megabytes each: fewer per transaction than chunks, so
	// a tick never waits long.
	n, err := db.deleteInBatches(bucketBench, keys, 50)
	if err != nil {
		return n, fmt.Errorf("expire bench runs: %w", err)
	}
	return n, nil
}
