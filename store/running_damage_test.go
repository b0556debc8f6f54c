package store_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// TestWriteHitsDamage damages every page of an open store under it: the
// next write finds it without a crash (bbolt's rollback would walk the
// damaged pages in a goroutine of its own), the store says it is damaged,
// and no later write touches the file.
func TestWriteHitsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	tick := func(i int) store.Tick {
		k := store.InstanceKey{ID: 7}
		tk := store.Tick{Time: at.Add(time.Duration(i) * time.Second), Samples: []store.Sample{{Key: k, Values: [3]uint64{uint64(i), uint64(i), 0}}}}
		if i == 0 {
			tk.Loaded = []store.Program{{Key: k, ID: 7, Name: "x"}}
		}
		return tk
	}
	if err := db.WriteTick(tick(0)); err != nil {
		t.Fatal(err)
	}
	var reported []string
	db.OnDamage(func(what string) { reported = append(reported, what) })
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	for off := int64(2 * 4096); off < fi.Size(); off += 4096 {
		f.WriteAt(bytes.Repeat([]byte{0xA5}, 16), off)
	}
	f.Close()
	before, _ := os.ReadFile(path)

	if err := db.WriteTick(tick(1)); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("write on damaged pages: %v, want a damage error", err)
	}
	if db.Damaged() == "" || len(reported) != 1 {
		t.Errorf("Damaged() = %q, reported %q: want the damage, once", db.Damaged(), reported)
	}
	for i := 2; i < 5; i++ {
		if err := db.WriteTick(tick(i)); !errors.Is(err, store.ErrWritesStopped) {
			t.Errorf("write %d after damage: %v, want writes stopped", i, err)
		}
	}
	if _, err := db.Series(store.InstanceKey{ID: 7}, at, at.Add(time.Hour)); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("read of damaged pages: %v, want a damage error", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the store was written after the damage was found")
	}
}
