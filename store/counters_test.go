package store

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func counterProgram(t *testing.T, db *DB, id uint32, at time.Time) InstanceKey {
	t.Helper()
	boot, err := db.Boot("boot-ctr")
	if err != nil {
		t.Fatal(err)
	}
	key := InstanceKey{Boot: boot, ID: id}
	if err := db.WriteTick(Tick{Time: at, Loaded: []Program{{Key: key, BootID: "boot-ctr", ID: id, Name: "ctr", Type: "socket_filter", FirstSeen: at}}}); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestCountersRoundTrip: windows written as open/close pairs come back in
// order with every column, across sealed chunks and a reopen, and the last
// sample is found from the open chunk or, once the series is sealed, from
// the newest sealed chunk.
func TestCountersRoundTrip(t *testing.T) {
	db, path := openTemp(t)
	start := time.UnixMilli(1_800_000_000_000)
	key := counterProgram(t, db, 7, start)
	other := counterProgram(t, db, 8, start)

	var want []CounterSample
	cum := CounterSample{Key: key, Mechanism: CounterExact, Present: 1 << 0}
	for w := range 100 { // 200 samples: more than one chunk
		open := cum
		open.Time = start.Add(time.Duration(w) * time.Minute)
		closed := cum
		closed.Time = open.Time.Add(10 * time.Second)
		closed.Counted += uint64(1000 + w)
		closed.Entries += uint64(1000 + w)
		closed.Values[0] += uint64(50_000 * (w + 1))
		cum = closed
		if err := db.WriteCounters(open, closed); err != nil {
			t.Fatal(err)
		}
		want = append(want, open, closed)
	}
	// Another instance's series stays apart.
	if err := db.WriteCounters(CounterSample{Key: other, Time: start, Mechanism: CounterExact, Present: 0xf, Counted: 3, Values: [CounterEvents]uint64{1, 2, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) {
		t.Helper()
		got, err := db.CounterSeries(key, start, start.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d samples back, wrote %d", len(got), len(want))
		}
		for i := range want {
			if !got[i].Time.Equal(want[i].Time) || got[i].Counted != want[i].Counted || got[i].Values != want[i].Values ||
				got[i].Present != want[i].Present || got[i].Mechanism != CounterExact || got[i].Entries != want[i].Entries || got[i].Key != key {
				t.Fatalf("sample %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		if !got[1].Has(0) || got[1].Has(1) || got[1].Has(9) {
			t.Errorf("Has: present %b", got[1].Present)
		}
		last, ok, err := db.LastCountersOf(key, CounterExact)
		if err != nil || !ok || last.Counted != cum.Counted || !last.Time.Equal(cum.Time) {
			t.Errorf("LastCountersOf(exact) = %+v, %v, %v; want counted %d at %v", last, ok, err, cum.Counted, cum.Time)
		}
		o, err := db.CounterSeries(other, start, start)
		if err != nil || len(o) != 1 || o[0].Values != [CounterEvents]uint64{1, 2, 3, 4} {
			t.Errorf("other series = %+v, %v", o, err)
		}
	}
	check(db)
	if p, err := db.Check(); err != nil || len(p) > 0 {
		t.Errorf("check: %v %v", p, err)
	}
	db.Close()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db)

	// Seal the series (as an unload would): the last sample now comes
	// from the newest sealed chunk.
	err = db.update(func(tx *bolt.Tx) error {
		return db.seal(tx.Bucket(bucketHead), tx.Bucket(bucketChunks), seriesKey(key, groupCounters))
	})
	if err != nil {
		t.Fatal(err)
	}
	check(db)

	if _, ok, err := db.LastCountersOf(InstanceKey{Boot: key.Boot, ID: 99}, CounterExact); ok || err != nil {
		t.Errorf("LastCountersOf of an instance without counters: %v, %v", ok, err)
	}
	// A sample whose every event is absent stays absent.
	got, _ := db.CounterSeries(other, start, start)
	if got[0].Has(4) {
		t.Error("event 4 does not exist")
	}
}

// TestCountersStats: counter series show up in the store stats under
// their own group.
func TestCountersStats(t *testing.T) {
	db, _ := openTemp(t)
	start := time.UnixMilli(1_800_000_000_000)
	key := counterProgram(t, db, 7, start)
	if err := db.WriteCounters(CounterSample{Key: key, Time: start, Mechanism: CounterExact, Present: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Groups["counters"]; g.Series != 1 || g.Samples != 1 {
		t.Errorf("counters group = %+v, want 1 series with 1 sample", g)
	}
}

// TestCountersExpire: counter samples older than the raw retention go.
func TestCountersExpire(t *testing.T) {
	db, _ := openTemp(t)
	start := time.UnixMilli(1_800_000_000_000)
	key := counterProgram(t, db, 7, start)
	if err := db.WriteCounters(CounterSample{Key: key, Time: start, Mechanism: CounterExact, Present: 1, Counted: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Expire(start.Add(30*24*time.Hour), Retention{Raw: 7 * 24 * time.Hour, Rollup: 400 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	got, err := db.CounterSeries(key, start, start.Add(time.Hour))
	if err != nil || len(got) != 0 {
		t.Errorf("after expiry: %+v, %v", got, err)
	}
}
