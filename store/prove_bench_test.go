package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// BenchmarkProveAtStart1GiB measures what proving a store costs at start
// on a store of at least 1 GiB: the start-up proof (meta pages, page tree
// and records in a child), the whole writable Open it runs in, and bbolt's
// own open (its free-list walk) without the proof, side by side.
// BPFPERF_BENCH_STORE names a store to reuse (it is made there if absent).
func BenchmarkProveAtStart1GiB(b *testing.B) {
	path := os.Getenv("BPFPERF_BENCH_STORE")
	if path == "" {
		path = filepath.Join(b.TempDir(), "bpfperf.db")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() < 1<<30 {
		makeBigStore(b, path, 1<<30)
	}
	fi, _ := os.Stat(path)
	b.Logf("store: %.2f GiB", float64(fi.Size())/(1<<30))
	const runs = 3
	pages := medianOf(runs, func() {
		if err := store.CheckFile(context.Background(), path, false); err != nil {
			b.Fatal(err)
		}
	})
	full := medianOf(runs, func() {
		if err := store.CheckFile(context.Background(), path, true); err != nil {
			b.Fatal(err)
		}
	})
	open := medianOf(runs, func() {
		db, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
	})
	unproved := medianOf(runs, func() {
		db, err := store.OpenUnproved(path)
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
	})
	b.Logf("median of %d: page-tree proof %v, full proof (every record) %v, proved Open %v, Open without proof %v", runs, pages, full, open, unproved)
	b.ReportMetric(pages.Seconds(), "prove-pages-s")
	b.ReportMetric(full.Seconds(), "prove-full-s")
	b.ReportMetric(open.Seconds(), "open-s")
	b.ReportMetric(unproved.Seconds(), "open-unproved-s")
}

// makeBigStore fills path with days of 1,000 steady programs until it
// holds at least size bytes.
func makeBigStore(b *testing.B, path string, size int64) {
	db, err := store.Open(path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	for day := 0; db.Size() < size; day++ {
		from := start.Add(time.Duration(day) * 24 * time.Hour)
		if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Steady: 1000}, Start: from, Duration: 24 * time.Hour, Batch: 3600, Seed: uint64(day)}); err != nil {
			b.Fatal(err)
		}
		b.Logf("day %d: %d MiB", day+1, db.Size()>>20)
	}
}
