package store

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestCountersOldRecordsAndSampled: a series written before the sampled
// mechanism (8 columns) still reads after sampled windows (10 columns)
// follow it, each sample keeps its mechanism, LastCountersOf finds the
// newest sample of each mechanism even in an older chunk, and the store
// checks clean.
func TestCountersOldRecordsAndSampled(t *testing.T) {
	db, path := openTemp(t)
	start := time.UnixMilli(1_800_000_000_000)
	key := counterProgram(t, db, 7, start)
	// Two exact samples as the old code wrote them: 8 columns.
	old := []CounterSample{
		{Key: key, Time: start, Mechanism: CounterExact, Present: 1},
		{Key: key, Time: start.Add(time.Second), Mechanism: CounterExact, Present: 1, Counted: 300, Entries: 300, Values: [CounterEvents]uint64{2_070_000}},
	}
	err := db.update(func(tx *bolt.Tx) error {
		head, chunks := tx.Bucket(bucketHead), tx.Bucket(bucketChunks)
		for _, s := range old {
			if err := db.appendSample(head, chunks, seriesKey(key, groupCounters), s.Time.UnixMilli(), s.columns()[:legacyCounterColumns]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sampled := []CounterSample{
		{Key: key, Time: start.Add(61 * time.Second), Mechanism: CounterSampled, Present: 1, Counted: 5000, Values: [CounterEvents]uint64{101_010_100}, WindowMs: 60_000, Samples: 10},
		{Key: key, Time: start.Add(121 * time.Second), Mechanism: CounterSampled, Present: 1 | 1<<1, Counted: 0, Values: [CounterEvents]uint64{20_202_020, 55_000_000}, WindowMs: 60_000, Samples: 2},
	}
	if err := db.WriteCounters(sampled...); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) {
		t.Helper()
		got, err := db.CounterSeries(key, start, start.Add(time.Hour))
		if err != nil || len(got) != 4 {
			t.Fatalf("series: %d samples, %v", len(got), err)
		}
		for i, want := range append(old, sampled...) {
			if got[i] != want {
				t.Errorf("sample %d: %+v, want %+v", i, got[i], want)
			}
		}
		if s, ok, err := db.LastCountersOf(key, CounterExact); !ok || err != nil || s != old[1] {
			t.Errorf("LastCountersOf(exact) = %+v, %v, %v; want %+v", s, ok, err, old[1])
		}
		if s, ok, err := db.LastCountersOf(key, CounterSampled); !ok || err != nil || s != sampled[1] {
			t.Errorf("LastCountersOf(sampled) = %+v, %v, %v", s, ok, err)
		}
		if _, ok, err := db.LastCountersOf(key, 9); ok || err != nil {
			t.Errorf("LastCountersOf(9) = %v, %v", ok, err)
		}
	}
	check(db)
	if p, err := db.Check(); err != nil || len(p) > 0 {
		t.Errorf("check: %v %v", p, err)
	}
	db.Close()
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db)
}
