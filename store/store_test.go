package store

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, path
}

func TestHistorySurvivesReopen(t *testing.T) {
	db, path := openTemp(t)
	boot, err := db.Boot("boot-a")
	if err != nil {
		t.Fatal(err)
	}
	key := InstanceKey{Boot: boot, ID: 42}
	start := time.UnixMilli(1_800_000_000_000)
	write := func(db *DB, from, n int) {
		for i := from; i < from+n; i++ {
			tick := Tick{Time: start.Add(time.Duration(i) * time.Second)}
			if i == 0 {
				tick.Loaded = []Program{{Key: key, BootID: "boot-a", ID: 42, Name: "xdp_pass", Type: "xdp", Tag: "0011223344556677", FirstSeen: tick.Time}}
				tick.Events = []Event{{Time: tick.Time, Kind: "loaded", ID: 42, Name: "xdp_pass"}}
			}
			tick.Samples = []Sample{{Key: key, Values: [statsColumns]uint64{uint64(i) * 1000, uint64(i) * 10, 0}}}
			if err := db.WriteTick(tick); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(db, 0, 250) // seals two chunks
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if again, _ := db.Boot("boot-a"); again != boot {
		t.Errorf("boot index changed across reopen: %d then %d", boot, again)
	}
	write(db, 300, 10) // after a 50 s "downtime"

	points, err := db.Series(key, start, start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 260 {
		t.Fatalf("got %d points, want 260", len(points))
	}
	for i, p := range points {
		want := i
		if i >= 250 {
			want = 300 + i - 250
		}
		if p.Time != start.Add(time.Duration(want)*time.Second) || p.Values[ColRunCnt] != uint64(want)*10 {
			t.Fatalf("point %d = %v %v, want t+%ds run_cnt %d", i, p.Time, p.Values, want, want*10)
		}
	}

	// A window in the middle of a sealed chunk.
	mid, err := db.Series(key, start.Add(130*time.Second), start.Add(139*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(mid) != 10 || mid[0].Values[ColRunTimeNs] != 130_000 {
		t.Errorf("window 130..139 s: %d points starting %v", len(mid), mid)
	}

	progs, err := db.Programs()
	if err != nil || len(progs) != 1 || progs[0].Name != "xdp_pass" || progs[0].Key != key || !progs[0].Loaded() {
		t.Errorf("programs = %+v, %v", progs, err)
	}
	events, err := db.Events(start, start.Add(time.Hour))
	if err != nil || len(events) != 1 || events[0].Kind != "loaded" {
		t.Errorf("events = %+v, %v", events, err)
	}
}

func TestUnloadSealsAndMarks(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	key := InstanceKey{Boot: 0, ID: 7}
	now := time.UnixMilli(1_800_000_000_000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.WriteTick(Tick{Time: now, Loaded: []Program{{Key: key, ID: 7, Name: "p"}}, Samples: []Sample{{Key: key}}}))
	must(db.WriteTick(Tick{Time: now.Add(time.Second), Unloaded: []InstanceKey{key}}))
	progs, _ := db.Programs()
	if len(progs) != 1 || !progs[0].UnloadedAt.Equal(now.Add(time.Second)) {
		t.Errorf("after unload: %+v", progs)
	}
	points, _ := db.Series(key, now, now)
	if len(points) != 1 {
		t.Errorf("sealed series has %d points, want 1", len(points))
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	db, path := openTemp(t)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("open newer schema: %v, want ErrNewerSchema", err)
	}
}

func TestOpenRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	if err := os.WriteFile(path, []byte("this is not a bbolt file, just some text that is long enough"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open garbage: %v, want ErrCorrupt", err)
	}
}

func TestOpenIsExclusive(t *testing.T) {
	db, path := openTemp(t)
	defer db.Close()
	if _, err := Open(path, Options{Timeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestCheckFindsDamage(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	key := InstanceKey{ID: 3}
	now := time.UnixMilli(1_800_000_000_000)
	for i := range 300 {
		tick := Tick{Time: now.Add(time.Duration(i) * time.Second), Samples: []Sample{{Key: key, Values: [statsColumns]uint64{uint64(i), uint64(i), 0}}}}
		if i == 0 {
			tick.Loaded = []Program{{Key: key, ID: 3, Name: "c"}}
		}
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
	}
	if problems, err := db.Check(); err != nil || len(problems) != 0 {
		t.Fatalf("a healthy store: %v %v", problems, err)
	}
	// Break one sealed chunk and drop the program record.
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketChunks).Cursor().First()
		if err := tx.Bucket(bucketChunks).Put(k, []byte{5, 3, 1}); err != nil {
			return err
		}
		return tx.Bucket(bucketPrograms).Delete(key.bytes())
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := db.Check()
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	if !strings.Contains(joined, "corrupt chunk") || !strings.Contains(joined, "no program record") {
		t.Errorf("check found:\n%s", joined)
	}
}

func TestStatsCountsSamples(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	key := InstanceKey{ID: 4}
	now := time.UnixMilli(1_800_000_000_000)
	for i := range 250 {
		tick := Tick{Time: now.Add(time.Duration(i) * time.Second), Samples: []Sample{{Key: key, Values: [statsColumns]uint64{uint64(i) * 100, uint64(i), 0}}}}
		if i == 0 {
			tick.Loaded = []Program{{Key: key, ID: 4, Name: "s"}}
		}
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	raw := st.Groups["raw"]
	if raw.Series != 1 || raw.Samples != 250 || raw.Chunks != 3 || st.Programs != 1 {
		t.Errorf("stats = %+v", st)
	}
	if !st.Oldest.Equal(now) || !st.Newest.Equal(now.Add(249*time.Second)) {
		t.Errorf("oldest %v newest %v", st.Oldest, st.Newest)
	}
	if bps := raw.BytesPerSample(3); bps > 1 {
		t.Errorf("a steady series costs %.2f bytes per sample", bps)
	}
}

// A store written by schema 1 (no profiles or bench buckets) is migrated in
// place on open, with its history intact.
func TestMigrateFromSchema1(t *testing.T) {
	db, path := openTemp(t)
	key := InstanceKey{ID: 5}
	now := time.UnixMilli(1_800_000_000_000)
	if err := db.WriteTick(Tick{Time: now, Loaded: []Program{{Key: key, ID: 5, Name: "m"}}, Samples: []Sample{{Key: key, Values: [statsColumns]uint64{7, 1, 0}}}}); err != nil {
		t.Fatal(err)
	}
	// Turn it back into what schema 1 wrote.
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		tx.DeleteBucket(bucketProfiles)
		tx.DeleteBucket(bucketBench)
		return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("read-only open of an old schema: %v, want a refusal that asks to migrate", err)
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); binary.BigEndian.Uint32(v) != SchemaVersion {
			t.Errorf("schema after migration: %x", v)
		}
		if tx.Bucket(bucketProfiles) == nil || tx.Bucket(bucketBench) == nil {
			t.Error("migration did not create the schema 2 buckets")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	points, err := db.Series(key, now, now)
	if err != nil || len(points) != 1 || points[0].Values[ColRunTimeNs] != 7 {
		t.Errorf("history after migration: %v %v", points, err)
	}
	if problems, _ := db.Check(); len(problems) > 0 {
		t.Errorf("check after migration: %v", problems)
	}
}

// A truncated copy of a store is refused before bbolt reads it.
func TestOpenRefusesTruncated(t *testing.T) {
	db, path := openTemp(t)
	key := InstanceKey{ID: 6}
	for i := range 2000 {
		tick := Tick{Time: time.UnixMilli(int64(i) * 1000), Samples: []Sample{{Key: key, Values: [statsColumns]uint64{uint64(i * i), uint64(i), 0}}}}
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
	}
	used := db.UsedBytes()
	db.Close()
	if err := os.Truncate(path, used/2); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("open truncated: %v", err)
	}
}

// TestCheckWhileWriting: a healthy store checked while ticks are committed
// (as bpfperf store check does on a running daemon) reports nothing. bbolt's
// page check alone, in a read-only transaction, called pages a later commit
// freed "reachable freed" now and then.
func TestCheckWhileWriting(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	now := time.UnixMilli(1_800_000_000_000)
	var keys []InstanceKey
	var loaded []Program
	for id := range uint32(50) {
		keys = append(keys, InstanceKey{ID: id + 1})
		loaded = append(loaded, Program{Key: keys[id], ID: id + 1, Name: "w"})
	}
	tick := func(i int) Tick {
		tk := Tick{Time: now.Add(time.Duration(i) * time.Second)}
		for _, k := range keys {
			tk.Samples = append(tk.Samples, Sample{Key: k, Values: [statsColumns]uint64{uint64(i * 1000), uint64(i), 0}})
		}
		if i == 0 {
			tk.Loaded = loaded
		}
		return tk
	}
	if err := db.WriteTick(tick(0)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	written := make(chan int)
	go func() {
		i := 1
		defer func() { written <- i }()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.WriteTick(tick(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 40 {
		if problems, err := db.Check(); err != nil || len(problems) > 0 {
			t.Errorf("check of a healthy store being written: %v %v", problems, err)
			break
		}
	}
	close(stop)
	t.Logf("%d ticks written during 40 checks", <-written)
}
