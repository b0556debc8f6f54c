package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func putProfiles(t *testing.T, db *DB, start time.Time, n int, every time.Duration) []string {
	t.Helper()
	var ids []string
	for i := range n {
		info := ProfileInfo{Start: start.Add(time.Duration(i) * every), Duration: int64(every), Kind: ProfileContinuous, Event: "cpu-clock", Hz: 99, Samples: int64(i)}
		id, err := db.PutProfile(info, []byte(fmt.Sprintf("pprof-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestProfilesRoundTripAndSurviveReopen(t *testing.T) {
	db, path := openTemp(t)
	start := time.Unix(1_800_000_000, 0)
	ids := putProfiles(t, db, start, 5, time.Minute)
	// An on-demand capture that overlaps the last two windows, stored last.
	od, err := db.PutProfile(ProfileInfo{Start: start.Add(3*time.Minute + 30*time.Second), Duration: int64(10 * time.Second), Kind: ProfileOnDemand, Event: "cpu-clock", Hz: 99, Samples: 7}, []byte("on-demand"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "2", "3", "4", "5"}; fmt.Sprint(ids) != fmt.Sprint(want) || od != "6" {
		t.Fatalf("ids %v then %s, want %v then 6", ids, od, want)
	}
	db.Close()
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	info, data, err := db.GetProfile("3")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "pprof-2" || !info.Start.Equal(start.Add(2*time.Minute)) || info.Kind != ProfileContinuous || info.Samples != 2 || info.Hz != 99 || info.Event != "cpu-clock" || info.Bytes != len(data) || info.Duration != int64(time.Minute) {
		t.Errorf("GetProfile(3) = %+v %q", info, data)
	}

	// A range lists the windows that overlap it, in start order, the
	// on-demand capture among them.
	list, err := db.ListProfiles(start.Add(3*time.Minute+10*time.Second), start.Add(4*time.Minute+10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list {
		got = append(got, p.ID+"/"+p.Kind)
	}
	if want := "[4/continuous 6/on-demand 5/continuous]"; fmt.Sprint(got) != want {
		t.Errorf("ListProfiles = %v, want %s", got, want)
	}
	if list, _ := db.ListProfiles(start.Add(-time.Hour), start.Add(-time.Second)); len(list) != 0 {
		t.Errorf("a range before every profile lists %d", len(list))
	}

	// The next id continues after the reopen.
	if id, _ := db.PutProfile(ProfileInfo{Start: start.Add(10 * time.Minute), Kind: ProfileContinuous}, []byte("x")); id != "7" {
		t.Errorf("id after reopen = %s, want 7", id)
	}

	for _, bad := range []string{"0", "99", "abc", "", "-1", "3x"} {
		if _, _, err := db.GetProfile(bad); !errors.Is(err, ErrNoProfile) {
			t.Errorf("GetProfile(%q) = %v, want ErrNoProfile", bad, err)
		}
	}
	if problems, err := db.Check(); err != nil || len(problems) > 0 {
		t.Errorf("check: %v %v", problems, err)
	}
}

func TestExpireProfiles(t *testing.T) {
	db, _ := openTemp(t)
	start := time.Unix(1_800_000_000, 0)
	putProfiles(t, db, start, 1200, time.Second) // more than one delete batch
	n, err := db.ExpireProfiles(start.Add(1100*time.Second), 100*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1000 {
		t.Errorf("expired %d, want 1000", n)
	}
	list, _ := db.ListProfiles(start, start.Add(time.Hour))
	if len(list) != 200 || list[0].ID != "1001" {
		t.Errorf("after expiry: %d profiles, first %+v; want 200 starting at id 1001", len(list), list[0])
	}
	if _, _, err := db.GetProfile("1000"); !errors.Is(err, ErrNoProfile) {
		t.Errorf("expired profile still readable: %v", err)
	}
	if n, _ := db.ExpireProfiles(start.Add(1100*time.Second), 100*time.Second); n != 0 {
		t.Errorf("second expiry deleted %d", n)
	}
	if n := db.Counts(time.Minute); n.Profiles != 200 || n.ProfileBytes == 0 {
		t.Errorf("Counts = %d profiles, %d bytes; want 200 and some", n.Profiles, n.ProfileBytes)
	}
}

func TestEachProfileStopsOnError(t *testing.T) {
	db, _ := openTemp(t)
	start := time.Unix(1_800_000_000, 0)
	putProfiles(t, db, start, 3, time.Minute)
	stop := errors.New("stop")
	var seen [][]byte
	err := db.EachProfile(start, start.Add(time.Hour), func(_ ProfileInfo, data []byte) error {
		seen = append(seen, bytes.Clone(data))
		return stop
	})
	if err != stop || len(seen) != 1 || string(seen[0]) != "pprof-0" {
		t.Errorf("EachProfile = %v after %q", err, seen)
	}
}

// A record that does not decode is reported as corruption, not skipped.
func TestCorruptProfileRecord(t *testing.T) {
	db, _ := openTemp(t)
	start := time.Unix(1_800_000_000, 0)
	putProfiles(t, db, start, 1, time.Minute)
	if err := db.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketProfiles).Put(profileKey(start.Add(time.Second), 9), []byte{1, 200})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ListProfiles(start, start.Add(time.Hour)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ListProfiles over a bad record = %v, want ErrCorrupt", err)
	}
}

func TestProfileDataByInfo(t *testing.T) {
	db, _ := openTemp(t)
	start := time.Unix(1_800_000_000, 0)
	putProfiles(t, db, start, 4, time.Minute)
	list, err := db.ListProfiles(start.Add(90*time.Second), start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	data, err := db.ProfileData(list)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%s", data) != "[pprof-1 pprof-2 pprof-3]" {
		t.Errorf("ProfileData = %s", data)
	}
	db.ExpireProfiles(start.Add(3*time.Minute), time.Minute)
	if _, err := db.ProfileData(list); !errors.Is(err, ErrNoProfile) {
		t.Errorf("ProfileData of an expired profile = %v, want ErrNoProfile", err)
	}
}
