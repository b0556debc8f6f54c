package store

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestCountsAnswerWhileAWriteIsStuck holds a write where CI once caught
// the daemon's (TestHealthCatchesHungSampler, 2026-11-27): in the kernel,
// writing bbolt's meta page with its meta lock held, on a frozen file
// system. Every read transaction then waits for the thaw (the test shows
// one does); Counts answers within its wait with the last counts and how
// long the store has not answered, and with fresh ones once the write
// ends.
func TestCountsAnswerWhileAWriteIsStuck(t *testing.T) {
	privtest.Root(t)
	fz := privtest.FreezableDir(t)
	db, err := Open(filepath.Join(fz.Path, "bpfperf.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // after the thaw Freeze registers
	start := time.UnixMilli(1_800_000_000_000)
	for id := range uint32(3) {
		key := InstanceKey{Boot: 0, ID: 10 + id}
		if err := db.WriteTick(Tick{Time: start, Loaded: []Program{{Key: key, ID: key.ID, Name: "p"}}, Samples: []Sample{{Key: key}}}); err != nil {
			t.Fatal(err)
		}
	}
	putProfiles(t, db, start, 2, time.Minute)
	progs, err := db.Programs()
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := db.ListProfiles(start, start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	before := db.Counts(time.Minute)
	if before.Programs != len(progs) || before.Profiles != len(profiles) || before.ProfileBytes == 0 || before.Unanswered != 0 {
		t.Fatalf("Counts = %+v; the store holds %d programs and %d profiles", before, len(progs), len(profiles))
	}

	fz.Freeze(t)
	// A write with no page to write but the meta page blocks there, in
	// the kernel, holding bbolt's meta lock.
	wrote := make(chan error, 1)
	go func() { wrote <- db.update(func(*bolt.Tx) error { return nil }) }()
	read := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // the write first
		_, err := db.Programs()
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("a read answered (%v) while a write was stuck on the frozen file system: the test no longer holds the meta lock", err)
	case <-time.After(2 * time.Second):
	}

	const wait = 300 * time.Millisecond
	asked := time.Now()
	answer := make(chan Counts, 1)
	go func() { answer <- db.Counts(wait) }()
	var stuck Counts
	select {
	case stuck = <-answer:
	case <-time.After(wait + 5*time.Second):
		fz.Thaw()
		t.Fatalf("Counts has not answered %v after it was asked, with the store stuck (wait %v)", time.Since(asked).Round(time.Millisecond), wait)
	}
	took := time.Since(asked)
	t.Logf("Counts answered in %v with the store stuck: %+v", took.Round(time.Millisecond), stuck)
	if took > wait+time.Second {
		t.Errorf("Counts took %v with the store stuck, wait %v", took, wait)
	}
	if stuck.Programs != before.Programs || stuck.Profiles != before.Profiles || stuck.ProfileBytes != before.ProfileBytes || !stuck.At.Equal(before.At) {
		t.Errorf("Counts with the store stuck = %+v, want the last ones %+v", stuck, before)
	}
	if stuck.Unanswered < wait {
		t.Errorf("Counts says the store has not answered for %v; it was asked %v ago", stuck.Unanswered, took)
	}
	// A second caller joins the count in flight: the store has not
	// answered for longer.
	if again := db.Counts(wait); again.Unanswered < stuck.Unanswered+wait {
		t.Errorf("a second Counts says the store has not answered for %v, the first %v", again.Unanswered, stuck.Unanswered)
	}

	if err := fz.Thaw(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"the write": wrote, "the read": read} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s after the thaw: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits 10s after the thaw", name)
		}
	}
	if after := db.Counts(time.Minute); after.Unanswered != 0 || after.Programs != before.Programs || !after.At.After(before.At) {
		t.Errorf("Counts after the thaw = %+v, want fresh ones of %d programs", after, before.Programs)
	}
}
