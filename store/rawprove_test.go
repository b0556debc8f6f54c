package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestProofCatchesOverflowFlips flips each bit of the overflow count of
// every page in use. bbolt's Tx.Check passes most such copies, and the
// first write that frees the page then panics inside a commit (seen in
// CI: "page 7 already freed", and the daemon hung on bbolt's writer
// lock). The proof must refuse every one.
func TestProofCatchesOverflowFlips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var loaded []Program
	for id := range uint32(300) {
		loaded = append(loaded, Program{Key: InstanceKey{ID: id + 1}, ID: id + 1, Name: fmt.Sprintf("prog_%d", id)})
	}
	for i := range 30 {
		tk := Tick{Time: at.Add(time.Duration(i) * time.Second)}
		if i == 0 {
			tk.Loaded = loaded
		}
		for _, p := range loaded {
			tk.Samples = append(tk.Samples, Sample{Key: p.Key, Values: [3]uint64{uint64(i * 10), uint64(i * 1000), 0}})
		}
		if err := db.WriteTick(tk); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := rawProve(path); len(p) > 0 {
		t.Fatalf("the sound store: %q", p)
	}
	// The pages in use, as the raw walk reaches them.
	f, _ := os.Open(path)
	fi, _ := f.Stat()
	metas := checkMetas(f, fi.Size())
	r := &rawReader{f: f, pageSize: int64(metas.newest.pageSize), pgid: metas.newest.pgid, seen: map[uint64]bool{}}
	buckets, _ := r.buckets(metas.newest.root)
	for _, b := range buckets {
		r.walk(b.root, b.inline, func(rawRecord) {})
	}
	f.Close()
	var inUse []uint64
	for id := range r.seen {
		if binary.LittleEndian.Uint16(good[int64(id)*r.pageSize+8:]) != 0 { // not an overflow page
			inUse = append(inUse, id)
		}
	}
	if len(inUse) < 4 {
		t.Fatalf("the test store uses %d pages: too few", len(inUse))
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	refused := 0
	for _, id := range inUse {
		for bit := range 32 {
			c := bytes.Clone(good)
			c[id*uint64(r.pageSize)+12+uint64(bit/8)] ^= 1 << (bit % 8)
			os.WriteFile(copyPath, c, 0o600)
			if len(rawProve(copyPath)) > 0 {
				refused++
				continue
			}
			// Passed: the page now claims pages nothing else holds, so
			// it must survive a write that frees and rewrites every page.
			if err := rewriteAll(copyPath); err != nil {
				t.Errorf("page %d overflow bit %d: passed the proof, then rewriting every page: %v", id, bit, err)
			} else if err := CheckFile(context.Background(), copyPath, true); err != nil {
				t.Errorf("page %d overflow bit %d: passed the proof, and after rewriting every page: %v", id, bit, err)
			}
		}
	}
	t.Logf("%d pages in use, 32 overflow flips each: %d refused, the rest harmless", len(inUse), refused)
	if refused < len(inUse)*16 {
		t.Errorf("%d of %d flips refused: most claim pages past the end or held by another page", refused, len(inUse)*32)
	}
}

// rewriteAll opens the store and puts every record back in one
// transaction, which frees every page in use and writes it anew.
func rewriteAll(path string) error {
	db, err := Open(path, Options{})
	if err != nil {
		return err
	}
	err = db.update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			var keys, values [][]byte
			b.ForEach(func(k, v []byte) error {
				keys, values = append(keys, bytes.Clone(k)), append(values, bytes.Clone(v))
				return nil
			})
			for i := range keys {
				if err := b.Put(keys[i], values[i]); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
