package store

import (
	"testing"
	"time"
)

// TestMapsRoundTrip writes readings of a map, marks it gone and reads
// them back; a store without maps reads as none.
func TestMapsRoundTrip(t *testing.T) {
	db, _ := openTemp(t)
	if recs, err := db.Maps(); err != nil || len(recs) != 0 {
		t.Fatalf("empty store: %v, %v", recs, err)
	}
	k := InstanceKey{Boot: 1, ID: 7}
	t0 := time.UnixMilli(1_700_000_000_000)
	rec := MapRecord{Key: k, ID: 7, Name: "flows", Type: "hash", MaxEntries: 1000, FirstSeen: t0}
	var want []MapPoint
	for i := range 300 { // more than a chunk holds
		at := t0.Add(time.Duration(i) * time.Minute)
		tick := MapTick{Time: at, Samples: []MapSample{{Key: k, Memlock: 4096 + uint64(i), Entries: int64(i)}}}
		if i == 0 {
			tick.Seen = []MapRecord{rec}
		}
		if err := db.WriteMaps(tick); err != nil {
			t.Fatal(err)
		}
		want = append(want, MapPoint{Time: at, Memlock: 4096 + uint64(i), Entries: int64(i)})
	}
	// An uncounted map stores -1.
	arr := InstanceKey{Boot: 1, ID: 8}
	if err := db.WriteMaps(MapTick{Time: t0, Seen: []MapRecord{{Key: arr, ID: 8, Type: "array"}}, Samples: []MapSample{{Key: arr, Memlock: 100, Entries: -1}}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.MapSeries(k, t0, t0.Add(300*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Memlock != want[i].Memlock || got[i].Entries != want[i].Entries {
			t.Fatalf("point %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if p, _ := db.MapSeries(arr, t0, t0); len(p) != 1 || p[0].Entries != -1 {
		t.Errorf("array map points %+v, want one with -1 entries", p)
	}
	gone := t0.Add(301 * time.Minute)
	if err := db.WriteMaps(MapTick{Time: gone, Gone: []InstanceKey{k}}); err != nil {
		t.Fatal(err)
	}
	recs, err := db.Maps()
	if err != nil || len(recs) != 2 || recs[0].Key != k || !recs[0].GoneAt.Equal(gone) || recs[0].Name != "flows" {
		t.Fatalf("records %+v, %v", recs, err)
	}
	// Everything of the gone map expires a day later; the other map's
	// record stays.
	n, err := db.ExpireMaps(gone.Add(25*time.Hour), 24*time.Hour)
	if err != nil || n == 0 {
		t.Fatalf("expire: %d, %v", n, err)
	}
	if p, _ := db.MapSeries(k, t0, gone); len(p) != 0 {
		t.Errorf("%d points left after expiry", len(p))
	}
	if recs, _ := db.Maps(); len(recs) != 1 || recs[0].Key != arr {
		t.Errorf("records after expiry: %+v", recs)
	}
	if c, err := db.Check(); err != nil || len(c) != 0 {
		t.Errorf("check after map writes: %+v, %v", c, err)
	}
}
