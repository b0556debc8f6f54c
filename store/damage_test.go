package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// The damage test runs short in `go test` and long in `make fuzz`:
// BPFPERF_DAMAGE_COPIES random page flips (default 200),
// BPFPERF_DAMAGE_TAIL flips in the unused tail of the meta pages (default
// 16), BPFPERF_DAMAGE_SEED to replay a run (printed by every run).
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// damageStore writes a small store with every kind of page: programs,
// raw and rolled-up chunks, events, open chunks; closed, as bytes.
func damageStore(t *testing.T, span time.Duration) []byte {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Idle: 10, Steady: 20, Bursty: 10}, Start: start, Duration: span, Batch: 600, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pageKinds lists the pages of a bbolt file by kind, from their headers.
func pageKinds(b []byte, pageSize int) (branch, leaf []int) {
	for p := 2; (p+1)*pageSize <= len(b); {
		h := b[p*pageSize:]
		flags, overflow := binary.LittleEndian.Uint16(h[8:]), binary.LittleEndian.Uint32(h[12:])
		switch flags {
		case 0x01:
			branch = append(branch, p)
		case 0x02:
			leaf = append(leaf, p)
		}
		p += 1 + int(min(overflow, 1<<20))
	}
	return branch, leaf
}

type damageCase struct {
	name string
	data []byte
}

func flipBit(b []byte, bit int) []byte {
	c := bytes.Clone(b)
	c[bit/8] ^= 1 << (bit % 8)
	return c
}

// judgeDamage is what every damaged copy must get: a check that ends
// within 10 s with sound or a named damage, an Open that refuses it
// (leaving it byte for byte) or serves it, and a served store that is
// sound after being written to. It returns whether Open refused it.
func judgeDamage(t *testing.T, dir string, c damageCase) (refused bool) {
	path := filepath.Join(dir, "store.db")
	if err := os.WriteFile(path, c.data, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	start := time.Now()
	checkErr := store.CheckFile(context.Background(), path, true)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("%s: check took %v", c.name, took)
	}
	var damage *store.DamageError
	if checkErr != nil && !errors.As(checkErr, &damage) {
		t.Errorf("%s: check: %v, want sound or damaged", c.name, checkErr)
	}
	db, err := store.Open(path, store.Options{})
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: open refused with %v, want a damage report", c.name, err)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, c.data) {
			t.Errorf("%s: refused (%v) but changed", c.name, err)
		}
		return true
	}
	if checkErr != nil {
		t.Errorf("%s: check found %v, yet Open served it", c.name, checkErr)
	}
	werr := db.WriteTick(store.Tick{Time: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), Events: []store.Event{{Kind: "daemon_start", Time: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}}})
	db.Close()
	if werr != nil {
		t.Errorf("%s: served, but writing failed: %v", c.name, werr)
	}
	if err := store.CheckFile(context.Background(), path, true); err != nil {
		t.Errorf("%s: served and written, then check says %v", c.name, err)
	}
	return false
}

// runDamage judges cases on 4 workers (each child is mostly waiting on
// its own start) and counts refusals.
func runDamage(t *testing.T, cases []damageCase) (refused int) {
	var mu sync.Mutex
	work := make(chan damageCase)
	var wg sync.WaitGroup
	for range 4 {
		dir := t.TempDir()
		wg.Go(func() {
			for c := range work {
				r := judgeDamage(t, dir, c)
				mu.Lock()
				if r {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	return refused
}

func TestDamagedMetaPages(t *testing.T) {
	good := damageStore(t, 10*time.Minute) // small: 1,280 copies of it
	const pageSize = 4096
	// Every bit of both meta pages' header and fields: each copy is
	// refused (a damaged newer page is never rolled back over).
	var cases []damageCase
	for page := range 2 {
		for bit := range 80 * 8 {
			cases = append(cases, damageCase{fmt.Sprintf("meta page %d bit %d", page, bit), flipBit(good, page*pageSize*8+bit)})
		}
	}
	if refused := runDamage(t, cases); refused != len(cases) {
		t.Errorf("%d of %d meta page flips refused, want all", refused, len(cases))
	}
	// The rest of a meta page is unused: such flips are harmless, and a
	// store that has them must be served and stay sound.
	seed := uint64(envInt("BPFPERF_DAMAGE_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("seed %d (BPFPERF_DAMAGE_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cases = nil
	for range envInt("BPFPERF_DAMAGE_TAIL", 16) {
		page, bit := rng.IntN(2), 80*8+rng.IntN((pageSize-80)*8)
		cases = append(cases, damageCase{fmt.Sprintf("meta page %d bit %d", page, bit), flipBit(good, page*pageSize*8+bit)})
	}
	if refused := runDamage(t, cases); refused != 0 {
		t.Errorf("%d flips in the unused tail of a meta page refused, want none", refused)
	}
}

func TestDamagedPages(t *testing.T) {
	good := damageStore(t, 3*time.Hour)
	const pageSize = 4096
	branch, leaf := pageKinds(good, pageSize)
	if len(branch) == 0 || len(leaf) < 10 {
		t.Fatalf("the test store has %d branch and %d leaf pages: too few to damage", len(branch), len(leaf))
	}
	seed := uint64(envInt("BPFPERF_DAMAGE_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("seed %d (BPFPERF_DAMAGE_SEED=%d replays it); %d bytes, %d branch and %d leaf pages", seed, seed, len(good), len(branch), len(leaf))
	rng := rand.New(rand.NewPCG(seed, 2))
	var cases []damageCase
	for i := range envInt("BPFPERF_DAMAGE_COPIES", 200) {
		var page, bit int
		var where string
		switch i % 3 {
		case 0: // a page header: id, flags, count, overflow
			all := append(append([]int{}, branch...), leaf...)
			page, bit, where = all[rng.IntN(len(all))], rng.IntN(16*8), "header"
		case 1:
			page, bit, where = branch[rng.IntN(len(branch))], 16*8+rng.IntN((pageSize-16)*8), "branch"
		case 2:
			page, bit, where = leaf[rng.IntN(len(leaf))], 16*8+rng.IntN((pageSize-16)*8), "leaf"
		}
		cases = append(cases, damageCase{fmt.Sprintf("%s page %d bit %d", where, page, bit), flipBit(good, page*pageSize*8+bit)})
	}
	// Truncations, an empty file, random bytes.
	for _, n := range []int{1, 100, pageSize, pageSize + 100, 2 * pageSize, len(good) / 3, len(good) / 2, len(good) - pageSize, len(good) - 1} {
		cases = append(cases, damageCase{fmt.Sprintf("truncated to %d bytes", n), good[:n]})
	}
	noise := make([]byte, len(good))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	cases = append(cases, damageCase{"random bytes", noise}, damageCase{"random bytes, 3 pages", noise[:3*pageSize]})
	refused := runDamage(t, cases)
	t.Logf("%d damaged copies: %d refused, %d served and sound after", len(cases), refused, len(cases)-refused)
	if refused == 0 {
		t.Error("no damaged copy was refused: the damage missed")
	}
}

// TestEmptyFileIsANewStore: a zero-length file has no history to lose,
// so Open makes it a new store, while check calls it unreadable.
func TestEmptyFileIsANewStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	os.WriteFile(path, nil, 0o600)
	var damage *store.DamageError
	if err := store.CheckFile(context.Background(), path, true); !errors.As(err, &damage) || !damage.Unreadable {
		t.Errorf("check of an empty file: %v, want unreadable", err)
	}
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := store.CheckFile(context.Background(), path, true); err != nil {
		t.Errorf("check after Open made it a store: %v", err)
	}
}
