package store

import (
	"testing"
	"time"
)

func TestRollupsKeepRatesExact(t *testing.T) {
	db, path := openTemp(t)
	key := InstanceKey{ID: 9}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// 3 hours at 1 s, 1000 runs/s at 50 ns each, with one idle stretch.
	var runs, ns uint64
	for i := 0; i < 3*3600; i++ {
		now := start.Add(time.Duration(i) * time.Second)
		tick := Tick{Time: now}
		if i == 0 {
			tick.Loaded = []Program{{Key: key, ID: 9, Name: "r", FirstSeen: now}}
		}
		if i < 4000 || i > 5000 {
			runs += 1000
			ns += 50_000
		}
		tick.Samples = []Sample{{Key: key, Values: [statsColumns]uint64{ns, runs, 0}}}
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
		if i%60 == 0 {
			if err := db.Rollup(now); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := start.Add(3 * time.Hour)
	if err := db.Rollup(end); err != nil {
		t.Fatal(err)
	}

	minutes, err := db.Rollups(key, Minute, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(minutes) != 180 {
		t.Fatalf("%d minute rollups, want 180", len(minutes))
	}
	for i, m := range minutes {
		if want := start.Add(time.Duration(i) * time.Minute); !m.Start.Equal(want) || !m.First.Time.Equal(want) || !m.Last.Time.Equal(want.Add(59*time.Second)) {
			t.Fatalf("minute %d: %v first %v last %v", i, m.Start, m.First.Time, m.Last.Time)
		}
	}
	hours, err := db.Rollups(key, Hour, start, end)
	if err != nil || len(hours) != 3 {
		t.Fatalf("hour rollups: %d, %v", len(hours), err)
	}
	// The last sample of hour 3 is the last raw sample.
	raw, _ := db.Series(key, end.Add(-time.Second), end)
	if len(raw) != 1 || hours[2].Last.Values != raw[0].Values {
		t.Errorf("hour 3 last = %v, raw last = %v", hours[2].Last.Values, raw)
	}
	// Runs between two rollup points equal the raw counters' difference:
	// 7200 s of runs minus the 1001 idle seconds.
	if got := hours[2].Last.Values[ColRunCnt] - hours[0].Last.Values[ColRunCnt]; got != 1000*(2*3600-1001) {
		t.Errorf("runs between the ends of hour 1 and 3 = %d", got)
	}

	// Reopening keeps rollups and does not roll anything up twice.
	db.Close()
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Rollup(end.Add(2 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	again, _ := db.Rollups(key, Minute, start, end.Add(2*time.Hour))
	if len(again) != 180 {
		t.Errorf("after reopen: %d minute rollups, want 180", len(again))
	}
}

func TestExpireKeepsWhatRetentionSays(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	old, fresh := InstanceKey{ID: 1}, InstanceKey{ID: 2}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// old: 10 days of one sample a minute, unloaded at the end of day 2.
	// fresh: loaded all along.
	for i := 0; i < 10*24*60; i++ {
		now := start.Add(time.Duration(i) * time.Minute)
		tick := Tick{Time: now}
		if i == 0 {
			tick.Loaded = []Program{{Key: old, ID: 1, Name: "old", FirstSeen: now}, {Key: fresh, ID: 2, Name: "fresh", FirstSeen: now}}
			tick.Events = []Event{{Time: now, Kind: "loaded", ID: 1}}
		}
		if i < 2*24*60 {
			tick.Samples = append(tick.Samples, Sample{Key: old, Values: [statsColumns]uint64{uint64(i), uint64(i), 0}})
		} else if i == 2*24*60 {
			tick.Unloaded = []InstanceKey{old}
		}
		tick.Samples = append(tick.Samples, Sample{Key: fresh, Values: [statsColumns]uint64{uint64(i), uint64(i), 0}})
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
		if i%60 == 0 {
			if err := db.Rollup(now); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := start.Add(10 * 24 * time.Hour)
	if err := db.Rollup(now); err != nil {
		t.Fatal(err)
	}
	got, err := db.Expire(now, Retention{Raw: 7 * 24 * time.Hour, Rollup: 9 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got.Chunks == 0 || got.Events != 1 || got.Programs != 0 {
		t.Errorf("expired %+v, want chunks, the one event, no programs (old's rollups are within 9 days)", got)
	}
	raw, _ := db.Series(fresh, start, now)
	if len(raw) == 0 || raw[0].Time.Before(now.Add(-7*24*time.Hour-2*time.Hour)) {
		t.Errorf("fresh raw starts at %v, want about 7 days back", raw[0].Time)
	}
	if last := raw[len(raw)-1]; last.Values[ColRunCnt] != 10*24*60-1 {
		t.Errorf("fresh's newest sample was expired: %+v", last)
	}
	if old, _ := db.Series(old, start, now); len(old) != 0 {
		t.Errorf("old raw samples beyond 7 days survived: %d", len(old))
	}
	mins, _ := db.Rollups(old, Minute, start, now)
	if len(mins) == 0 {
		t.Error("old's minute rollups (2..10 days old, kept 9 days) are all gone")
	}
	for _, m := range mins {
		if m.Last.Time.Before(now.Add(-9*24*time.Hour - time.Hour)) {
			t.Errorf("rollup from %v survived the 9-day cutoff", m.Start)
			break
		}
	}

	// A shorter rollup retention removes old entirely, record included.
	got, err = db.Expire(now, Retention{Raw: 7 * 24 * time.Hour, Rollup: 3 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got.Programs != 1 {
		t.Errorf("expired %+v, want old's record gone", got)
	}
	if mins, _ := db.Rollups(old, Minute, start, now); len(mins) != 0 {
		t.Errorf("%d rollups of old survived", len(mins))
	}
}
