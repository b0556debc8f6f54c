package store_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// Merging sealed chunks into segments changes nothing a reader sees.
func TestMergeKeepsEverySample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(3 * 24 * time.Hour)
	if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Idle: 2, Steady: 2, Bursty: 2}, Start: start, Duration: end.Sub(start), Batch: 3600}); err != nil {
		t.Fatal(err)
	}
	progs, _ := db.Programs()
	read := func() map[store.InstanceKey][]store.Point {
		out := map[store.InstanceKey][]store.Point{}
		for _, p := range progs {
			pts, err := db.Series(p.Key, start, end)
			if err != nil {
				t.Fatal(err)
			}
			out[p.Key] = pts
			mins, err := db.Rollups(p.Key, store.Minute, start, end)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mins {
				out[p.Key] = append(out[p.Key], m.First, m.Last)
			}
		}
		return out
	}
	before := read()
	statsBefore, _ := db.Stats()

	n, err := db.Merge(end)
	if err != nil {
		t.Fatal(err)
	}
	// Two complete days of raw samples per program.
	if n < 2*len(progs) {
		t.Errorf("merged %d segments, want at least %d", n, 2*len(progs))
	}
	after := read()
	for k, pts := range before {
		if len(after[k]) != len(pts) {
			t.Fatalf("program %d: %d points before merging, %d after", k.ID, len(pts), len(after[k]))
		}
		for i := range pts {
			if after[k][i] != pts[i] {
				t.Fatalf("program %d point %d: %v, was %v", k.ID, i, after[k][i], pts[i])
			}
		}
	}
	statsAfter, _ := db.Stats()
	if statsAfter.Groups["raw"].Samples != statsBefore.Groups["raw"].Samples {
		t.Errorf("raw samples %d before, %d after", statsBefore.Groups["raw"].Samples, statsAfter.Groups["raw"].Samples)
	}
	if problems, err := db.Check(); err != nil || len(problems) > 0 {
		t.Errorf("check after merge: %v %v", problems, err)
	}
	// Merging again finds nothing; expiry still works on segments.
	if n, _ := db.Merge(end); n != 0 {
		t.Errorf("second merge wrote %d segments", n)
	}
	exp, err := db.Expire(end, store.Retention{Raw: 36 * time.Hour, Rollup: 400 * 24 * time.Hour})
	if err != nil || exp.Chunks == 0 {
		t.Errorf("expire after merge: %+v %v", exp, err)
	}
	for _, p := range progs {
		pts, _ := db.Series(p.Key, start, end)
		if len(pts) == 0 || pts[0].Time.Before(end.Add(-60*time.Hour)) {
			t.Errorf("program %d: raw history starts %v after expiring to 36 h", p.Key.ID, pts[0].Time)
		}
	}
}
