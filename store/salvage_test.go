package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// TestSalvageLosesOnlyTheDamagedPage destroys one leaf page of sealed
// chunks: salvage keeps every other record, names the lost page, writes a
// store that passes check and serves every other program's history in
// full, and leaves the damaged file as it was.
func TestSalvageLosesOnlyTheDamagedPage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bpfperf.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	end := start.Add(3 * time.Hour)
	if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Steady: 30, Bursty: 10}, Start: start, Duration: end.Sub(start), Batch: 600, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	progs, err := db.Programs()
	if err != nil {
		t.Fatal(err)
	}
	series := map[store.InstanceKey][]store.Point{}
	for _, p := range progs {
		if series[p.Key], err = db.Series(p.Key, start, end); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	good, _ := os.ReadFile(path)

	// A leaf page in use holding sealed chunks of program 20: a page
	// whose bytes hold a 17-byte chunk key of it and whose damage check
	// finds (a free page holding an old copy would not count).
	const pageSize = 4096
	key := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0), 20)
	// A chunk key goes on with its start time; an open chunk's key (in
	// the head bucket) stops at the group byte.
	key = append(append(key, 0), binary.BigEndian.AppendUint64(nil, uint64(start.UnixMilli()))[:4]...)
	if !bytes.Equal(key[9:], binary.BigEndian.AppendUint64(nil, uint64(end.UnixMilli()))[:4]) {
		t.Fatal("the test's time range crosses a 4-byte boundary of its millisecond keys")
	}
	victim, records := -1, 0
	var damaged []byte
	for p := 2; (p+1)*pageSize <= len(good) && victim < 0; p++ {
		page := good[p*pageSize : (p+1)*pageSize]
		if binary.LittleEndian.Uint16(page[8:]) != 0x02 || !bytes.Contains(page, key) || binary.LittleEndian.Uint16(page[10:]) < 2 {
			continue
		}
		damaged = bytes.Clone(good)
		copy(damaged[p*pageSize:], bytes.Repeat([]byte{0xA5}, 64))
		os.WriteFile(path, damaged, 0o600)
		if store.CheckFile(context.Background(), path, true) != nil {
			victim, records = p, int(binary.LittleEndian.Uint16(page[10:]))
		}
	}
	if victim < 0 {
		t.Fatal("no leaf page in use holds program 20's chunks")
	}

	to := filepath.Join(dir, "salvaged.db")
	rep, err := store.Salvage(path, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("page %d (%d records) damaged: %+v, lost %q", victim, records, rep.Buckets, rep.Lost)
	if now, _ := os.ReadFile(path); !bytes.Equal(now, damaged) {
		t.Error("salvage changed the damaged file")
	}
	if len(rep.Lost) != 1 {
		t.Errorf("lost %q, want the one page", rep.Lost)
	}
	for _, b := range rep.Buckets {
		want := 0
		if b.Name == "chunks" {
			want = 1
		}
		if b.LostPages != want || b.Dropped != 0 {
			t.Errorf("bucket %s: %d pages lost, %d records dropped; want %d and 0", b.Name, b.LostPages, b.Dropped, want)
		}
	}
	if err := store.CheckFile(context.Background(), to, true); err != nil {
		t.Fatalf("the salvaged store: %v", err)
	}
	sdb, err := store.Open(to, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	// Every program keeps every sample but those of the chunks on the
	// damaged page; the programs that lost some lost at most that page.
	lostSamples, hit := 0, 0
	for k, want := range series {
		got, err := sdb.Series(k, start, end)
		if err != nil {
			t.Fatalf("program %d: %v", k.ID, err)
		}
		if len(got) != len(want) {
			hit++
			lostSamples += len(want) - len(got)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("program %d sample %d: %v, want %v", k.ID, i, got[i], want[i])
			}
		}
	}
	if hit == 0 || hit > records {
		t.Errorf("%d programs lost samples (%d samples), want between 1 and the page's %d chunks", hit, lostSamples, records)
	}
}
