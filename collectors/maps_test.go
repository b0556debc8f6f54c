package collectors

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// newTestMap creates a uniquely named map of typ and closes it when the
// test ends.
func newTestMap(tb testing.TB, typ ebpf.MapType, keySize, maxEntries uint32) (*ebpf.Map, uint32) {
	tb.Helper()
	spec := &ebpf.MapSpec{Name: uniqueName("m"), Type: typ, KeySize: keySize, ValueSize: 8, MaxEntries: maxEntries}
	if typ == ebpf.LPMTrie {
		spec.Flags = 1 // BPF_F_NO_PREALLOC, which the kernel requires
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		tb.Fatalf("create %v map: %v", typ, err)
	}
	tb.Cleanup(func() { m.Close() })
	info, err := m.Info()
	if err != nil {
		tb.Fatalf("map info: %v", err)
	}
	id, _ := info.ID()
	return m, uint32(id)
}

// fillTo puts keys 0..n-1 in a hash map and deletes keys n.. that exist.
func fillTo(tb testing.TB, m *ebpf.Map, n, max uint32) {
	tb.Helper()
	for k := uint32(0); k < max; k++ {
		if k < n {
			if err := m.Put(k, uint64(k)); err != nil {
				tb.Fatalf("put %d: %v", k, err)
			}
		} else if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			tb.Fatalf("delete %d: %v", k, err)
		}
	}
}

func findMap(tb testing.TB, maps []MapInfo, id uint32) MapInfo {
	tb.Helper()
	for _, m := range maps {
		if m.ID == id {
			return m
		}
	}
	tb.Fatalf("map %d not in the reading", id)
	return MapInfo{}
}

func readMapsWithIter(tb testing.TB) []MapInfo {
	tb.Helper()
	it, err := NewMapIter()
	if err != nil {
		tb.Fatalf("map iterator: %v", err)
	}
	defer it.Close()
	counts, err := it.Counts()
	if err != nil {
		tb.Fatal(err)
	}
	maps, _, err := ReadMaps(MapsOptions{Counts: counts})
	if err != nil {
		tb.Fatal(err)
	}
	return maps
}

// TestReadMapsEntries fills a hash map to K and then K/2: the kernel's
// count and a walk of the keys both read K, then K/2.
func TestReadMapsEntries(t *testing.T) {
	privtest.Root(t)
	const max, k = 1000, 600
	m, id := newTestMap(t, ebpf.Hash, 4, max)
	for _, n := range []uint32{k, k / 2} {
		fillTo(t, m, n, max)
		got := findMap(t, readMapsWithIter(t), id)
		if got.Entries != int64(n) || got.Counted != CountKernel || got.MaxEntries != max || got.Type != "hash" {
			t.Errorf("with the iterator: %+v, want %d entries counted by the kernel", got, n)
		}
		maps, cost, err := ReadMaps(MapsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = findMap(t, maps, id)
		if got.Entries != int64(n) || got.Counted != CountWalk || got.Partial {
			t.Errorf("by walking: %+v, want %d entries walked", got, n)
		}
		if cost.Walked < int(n) {
			t.Errorf("cost says %d keys walked, want at least %d", cost.Walked, n)
		}
	}
}

// TestReadMapsLPMAndArray: an LPM trie is walked (the kernel keeps no
// count of it); an array has no fill level.
func TestReadMapsLPMAndArray(t *testing.T) {
	privtest.Root(t)
	trie, trieID := newTestMap(t, ebpf.LPMTrie, 8, 100)
	for i := range 7 {
		key := make([]byte, 8)
		binary.LittleEndian.PutUint32(key, 32) // prefix length
		key[4] = byte(i)
		if err := trie.Put(key, uint64(i)); err != nil {
			t.Fatalf("put trie key: %v", err)
		}
	}
	arr, arrID := newTestMap(t, ebpf.Array, 4, 10)
	for k := uint32(0); k < 10; k++ {
		arr.Put(k, uint64(1))
	}
	maps := readMapsWithIter(t)
	if got := findMap(t, maps, trieID); got.Entries != 7 || got.Counted != CountWalk || got.Type != "lpm_trie" {
		t.Errorf("LPM trie: %+v, want 7 entries walked", got)
	}
	if got := findMap(t, maps, arrID); got.Entries != -1 || got.Counted != "" || got.Fill() != -1 {
		t.Errorf("array: %+v, want no fill level", got)
	}
}

// TestReadMapsBudget: a walk stops at the budget and says so.
func TestReadMapsBudget(t *testing.T) {
	privtest.Root(t)
	m, id := newTestMap(t, ebpf.Hash, 4, 100)
	fillTo(t, m, 50, 100)
	maps, _, err := ReadMaps(MapsOptions{WalkBudget: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if got := findMap(t, maps, id); got.Entries != 50 || got.Partial {
		t.Errorf("unbounded walk: %+v, want 50 entries", got)
	}
	// Exactly at the budget: complete.
	if n, done, err := walkMapByID(t, id, 50); n != 50 || !done || err != nil {
		t.Errorf("walk with a budget of 50 over 50 keys = %d, done %v, %v; want 50, done", n, done, err)
	}
	if n, done, err := walkMapByID(t, id, 20); n != 20 || done || err != nil {
		t.Errorf("walk with a budget of 20 over 50 keys = %d, done %v, %v; want 20, not done", n, done, err)
	}
}

func walkMapByID(tb testing.TB, id uint32, limit int) (int, bool, error) {
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close()
	info, _ := m.Info()
	return walkKeys(m.FD(), info.KeySize, limit)
}

// TestReadMapsMemlockEqualsBpftool: memory is the figure `bpftool map
// show` prints.
func TestReadMapsMemlockEqualsBpftool(t *testing.T) {
	privtest.Root(t)
	m, id := newTestMap(t, ebpf.Hash, 4, 4096)
	fillTo(t, m, 100, 100)
	var bt struct {
		ID      uint32 `json:"id"`
		Memlock uint64 `json:"bytes_memlock"`
		Name    string `json:"name"`
	}
	bpftool(t, &bt, "map", "show", "id", strconv.Itoa(int(id)))
	got := findMap(t, readMapsWithIter(t), id)
	if got.Memlock != bt.Memlock || got.Memlock == 0 || got.Name != bt.Name {
		t.Errorf("memlock %d name %q, bpftool says %d %q", got.Memlock, got.Name, bt.Memlock, bt.Name)
	}
}

// TestReadMapsHoldsNothing: no map fd stays open after a reading.
func TestReadMapsHoldsNothing(t *testing.T) {
	privtest.Root(t)
	newTestMap(t, ebpf.Hash, 4, 10)
	before := countMapFds(t)
	readMapsWithIter(t)
	if _, _, err := ReadMaps(MapsOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := countMapFds(t); after != before {
		t.Errorf("map fds: %d before the reading, %d after", before, after)
	}
}

func countMapFds(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); target == "anon_inode:bpf-map" {
			n++
		}
	}
	return n
}
