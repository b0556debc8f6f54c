package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func benchReport(tests int) []byte {
	var b strings.Builder
	b.WriteString(`{"time":"2026-11-21T10:00:00Z","results":[`)
	for i := range tests {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"t/%d","runs":[{"cpu":-1,"measurements_ns":[8.1,8.2,8.3,8.4,8.5,8.6,8.7,8.8,8.9,9.0]}]}`, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func TestBenchRunsRoundTrip(t *testing.T) {
	db, path := openTemp(t)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	small, large := benchReport(1), benchReport(500)
	if len(large) <= benchCompressOver {
		t.Fatalf("large report is %d bytes, not over the compression threshold", len(large))
	}
	var stored []BenchRun
	for i, rep := range [][]byte{small, large, small} {
		r, err := db.PutBenchRun(BenchRun{Time: t0.Add(time.Duration(i) * time.Hour), Tests: i + 1, Kernel: "6.18", Commit: "abc", Label: fmt.Sprint("run ", i)}, rep)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != uint64(i+1) || r.Bytes != len(rep) || r.Stored.IsZero() {
			t.Errorf("put %d: got %+v", i, r)
		}
		stored = append(stored, r)
	}

	// The large report is stored compressed.
	db.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBench).Get(benchKey(stored[1].Time, 2))
		if _, enc, body, err := splitBenchValue(nil, v); err != nil || enc != benchGzip || len(body) > len(large)/4 {
			t.Errorf("large report stored as encoding %d, %d bytes of %d (%v); want gzip, under a quarter", enc, len(body), len(large), err)
		}
		return nil
	})
	check := func(db *DB) {
		t.Helper()
		all, err := db.ListBenchRuns(t0.Add(-time.Hour), t0.Add(10*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 {
			t.Fatalf("list: %d runs, want 3", len(all))
		}
		for i, r := range all {
			if r.ID != stored[i].ID || !r.Time.Equal(stored[i].Time) || r.Tests != i+1 || r.Label != stored[i].Label || r.Kernel != "6.18" || r.Commit != "abc" {
				t.Errorf("list[%d] = %+v, want %+v", i, r, stored[i])
			}
		}
		mid, err := db.ListBenchRuns(t0.Add(30*time.Minute), t0.Add(90*time.Minute))
		if err != nil || len(mid) != 1 || mid[0].ID != 2 {
			t.Errorf("list of the middle hour = %+v, %v; want run 2 alone", mid, err)
		}
		none, err := db.ListBenchRuns(t0.Add(24*time.Hour), t0.Add(48*time.Hour))
		if err != nil || len(none) != 0 {
			t.Errorf("list of an empty range = %+v, %v", none, err)
		}
		for i, want := range [][]byte{small, large, small} {
			r, rep, err := db.GetBenchRun(uint64(i + 1))
			if err != nil {
				t.Fatal(err)
			}
			if r.ID != uint64(i+1) || !bytes.Equal(rep, want) {
				t.Errorf("get %d: run %+v, report %d bytes, want %d", i+1, r, len(rep), len(want))
			}
		}
		if _, _, err := db.GetBenchRun(99); !errors.Is(err, ErrUnknownBenchRun) {
			t.Errorf("get 99: %v, want ErrUnknownBenchRun", err)
		}
	}
	check(db)

	// Each run left an event.
	ev, err := db.Events(t0.Add(-time.Hour), t0.Add(10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 3 || ev[1].Kind != "bench_run" || !ev[1].Time.Equal(t0.Add(time.Hour)) || !strings.Contains(ev[1].Detail, "run 2: 2 tests") {
		t.Errorf("events = %+v, want one bench_run per run", ev)
	}

	// Runs survive a reopen, and ids keep counting.
	db.Close()
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db)
	r, err := db.PutBenchRun(BenchRun{Time: t0.Add(3 * time.Hour), Tests: 1}, small)
	if err != nil || r.ID != 4 {
		t.Fatalf("put after reopen: %+v, %v; want id 4", r, err)
	}
	if problems, err := db.Check(); err != nil || len(problems) > 0 {
		t.Errorf("check: %v %v", problems, err)
	}
}

func TestBenchRunRefusesNoTime(t *testing.T) {
	db, _ := openTemp(t)
	if _, err := db.PutBenchRun(BenchRun{Tests: 1}, benchReport(1)); err == nil {
		t.Error("stored a run without a time")
	}
	if runs, _ := db.ListBenchRuns(time.Time{}, time.Now()); len(runs) != 0 {
		t.Errorf("a refused run was stored: %+v", runs)
	}
}

func TestExpireBench(t *testing.T) {
	db, _ := openTemp(t)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	keep := Retention{Raw: 7 * 24 * time.Hour, Rollup: 400 * 24 * time.Hour}
	// 120 old runs (more than one delete batch) and 3 recent ones.
	for i := range 123 {
		at := now.Add(-keep.Rollup - time.Duration(120-i)*time.Hour)
		if i >= 120 {
			at = now.Add(-time.Duration(i) * time.Minute)
		}
		if _, err := db.PutBenchRun(BenchRun{Time: at, Tests: 1}, benchReport(1)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.ExpireBench(now, keep)
	if err != nil || n != 120 {
		t.Fatalf("expire: %d, %v; want 120 deleted", n, err)
	}
	left, err := db.ListBenchRuns(time.Time{}, now)
	if err != nil || len(left) != 3 || left[0].ID != 123 {
		t.Errorf("left after expiry: %+v, %v; want runs 121-123", left, err)
	}
	if n, err := db.ExpireBench(now, keep); err != nil || n != 0 {
		t.Errorf("second expire: %d, %v; want nothing", n, err)
	}
}
