package bench

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
)

// MapSizes are the entry counts of the map experiments.
var MapSizes = []int{1, 1 << 10, 1 << 16, 1 << 20}

// KeyPatterns are the key sequences of the map experiments.
var KeyPatterns = []string{"uniform", "zipf"}

// keySeqLen is the length of the key sequence (KEYS in maps.c).
const keySeqLen = 1 << 16

// zipfS is the exponent of the Zipf key pattern (Go's generator needs > 1).
const zipfS = 1.1

type mapKind struct {
	name  string
	ops   []string
	lru   bool // LRU maps may evict before they are full: misses are allowed
	lpm   bool
	inner bool // map of maps: values are inner maps
	array bool // always full, nothing to insert
}

var mapKinds = []mapKind{
	{name: "array", ops: []string{"lookup", "update", "replace"}, array: true},
	{name: "percpu_array", ops: []string{"lookup", "update", "replace"}, array: true},
	{name: "hash", ops: MapOps},
	{name: "percpu_hash", ops: MapOps},
	{name: "lru_hash", ops: MapOps, lru: true},
	{name: "lru_percpu_hash", ops: MapOps, lru: true},
	{name: "lpm_trie", ops: MapOps, lpm: true},
	{name: "array_of_maps", ops: []string{"lookup"}, inner: true},
	{name: "hash_of_maps", ops: []string{"lookup"}, inner: true},
}

// MapOps are the operations of the map experiments, in the suite's order.
var MapOps = []string{"lookup", "update", "replace", "delete_insert"}

// MapTypes lists the map types of the map experiments, in the suite's
// order.
func MapTypes() []string {
	names := make([]string, len(mapKinds))
	for i, k := range mapKinds {
		names[i] = k.name
	}
	return names
}

var opDoc = map[string]string{
	"lookup":        "bpf_map_lookup_elem of a present key",
	"update":        "lookup and write the value in place (*v += 1)",
	"replace":       "bpf_map_update_elem(BPF_EXIST) of a present key",
	"delete_insert": "bpf_map_delete_elem then bpf_map_update_elem(BPF_NOEXIST)",
}

// SizeName writes 1024 as 1K and 1048576 as 1M.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

type mapState struct {
	coll *ebpf.Collection
	size int
}

func mapTests() []Test {
	var tests []Test
	keygenFix := mapFixture(mapKinds[0], 1)
	for _, pat := range KeyPatterns {
		tests = append(tests, Test{
			Name:    "maps/keygen/keys=" + pat,
			Group:   "maps",
			Entry:   "keygen",
			Doc:     "reading the next key only: the overhead inside every map test",
			Labels:  map[string]string{"map": "keygen", "op": "keygen", "keys": pat},
			Quick:   true,
			fixture: keygenFix,
			prepare: mapPrepare("keygen", 1, pat, want(0)),
		})
	}
	for _, kind := range mapKinds {
		for _, size := range MapSizes {
			fix := mapFixture(kind, size)
			for _, op := range kind.ops {
				for _, pat := range KeyPatterns {
					var w *uint32
					if !kind.lru {
						w = want(0)
					}
					tests = append(tests, Test{
						Name:  fmt.Sprintf("maps/%s/%s/size=%s/keys=%s", kind.name, op, SizeName(size), pat),
						Group: "maps",
						Entry: kind.name + "_" + op,
						Doc:   opDoc[op],
						Labels: map[string]string{"map": kind.name, "op": op,
							"size": fmt.Sprint(size), "keys": pat},
						Quick:   size <= 1<<10,
						fixture: fix,
						prepare: mapPrepare(kind.name+"_"+op, size, pat, w),
					})
				}
			}
		}
	}
	return tests
}

// mapFixture loads the programs for one map type with the map sized and
// filled: keys 0..size-1, values 0.
func mapFixture(kind mapKind, size int) *fixture {
	return &fixture{open: func() (any, func(), error) {
		spec, err := loadMaps()
		if err != nil {
			return nil, nil, err
		}
		for name := range spec.Programs {
			if name != "keygen" && !opOf(name, kind.name) {
				delete(spec.Programs, name)
			}
		}
		for name := range spec.Maps {
			if name != kind.name && !strings.HasPrefix(name, ".") {
				delete(spec.Maps, name)
			}
		}
		spec.Maps[kind.name].MaxEntries = uint32(size)
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("load %s programs: %w", kind.name, err)
		}
		if err := fillMap(coll.Maps[kind.name], spec.Maps[kind.name], kind, size); err != nil {
			coll.Close()
			return nil, nil, fmt.Errorf("fill %s with %d entries: %w", kind.name, size, err)
		}
		return &mapState{coll: coll, size: size}, func() { coll.Close() }, nil
	}}
}

// opOf reports whether prog is an operation on kind: "hash_lookup" is,
// "percpu_hash_lookup" is not, for kind "hash".
func opOf(prog, kind string) bool {
	rest, ok := strings.CutPrefix(prog, kind+"_")
	return ok && slices.Contains(MapOps, rest)
}

func fillMap(m *ebpf.Map, spec *ebpf.MapSpec, kind mapKind, size int) error {
	if kind.array {
		return nil
	}
	var values any
	var inner *ebpf.Map
	keys := make([]uint32, size)
	for i := range keys {
		keys[i] = uint32(i)
	}
	var keyAny any = keys
	switch {
	case kind.inner:
		var err error
		inner, err = ebpf.NewMap(spec.InnerMap)
		if err != nil {
			return fmt.Errorf("inner map: %w", err)
		}
		defer inner.Close()
		fds := make([]uint32, size)
		for i := range fds {
			fds[i] = uint32(inner.FD())
		}
		values = fds
	case kind.lpm:
		lk := make([]uint64, size) // struct lpm_key { prefixlen = 32; addr = i }
		for i := range lk {
			lk[i] = 32 | uint64(i)<<32
		}
		keyAny = lk
		values = make([]uint64, size)
	case strings.Contains(kind.name, "percpu"):
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return err
		}
		values = make([]uint64, size*n)
	default:
		values = make([]uint64, size)
	}
	_, err := m.BatchUpdate(keyAny, values, nil)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("batch update: %w", err)
	}
	// Types without batch operations: one syscall per entry.
	for i := 0; i < size; i++ {
		var k, v any
		switch {
		case kind.inner:
			k, v = uint32(i), inner
		case kind.lpm:
			k, v = keyAny.([]uint64)[i], uint64(0)
		default:
			k, v = uint32(i), uint64(0)
		}
		if err := m.Update(k, v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("insert entry %d: %w", i, err)
		}
	}
	return nil
}

// KeySequence is the deterministic sequence of keys in [0, size) that the
// map tests read, one per run: uniform, or Zipf with exponent 1.1 over a
// fixed random permutation of the keys (so hot keys are not simply the
// lowest ones).
func KeySequence(pattern string, size int) ([]uint32, error) {
	rng := rand.New(rand.NewSource(int64(size)*31 + int64(len(pattern))))
	seq := make([]uint32, keySeqLen)
	switch pattern {
	case "uniform":
		for i := range seq {
			seq[i] = uint32(rng.Intn(size))
		}
	case "zipf":
		var perm []int
		if size > 1 {
			perm = rng.Perm(size)
			z := rand.NewZipf(rng, zipfS, 1, uint64(size-1))
			for i := range seq {
				seq[i] = uint32(perm[z.Uint64()])
			}
		}
	default:
		return nil, fmt.Errorf("%w: unknown key pattern %q (have uniform, zipf)", ErrBadConfig, pattern)
	}
	return seq, nil
}

func mapPrepare(entry string, size int, pattern string, w *uint32) func(any) (*Case, error) {
	return func(state any) (*Case, error) {
		st := state.(*mapState)
		seq, err := KeySequence(pattern, size)
		if err != nil {
			return nil, err
		}
		if err := st.coll.Variables["keys"].Set(seq); err != nil {
			return nil, fmt.Errorf("set key sequence: %w", err)
		}
		if err := st.coll.Variables["pos"].Set(uint32(0)); err != nil {
			return nil, fmt.Errorf("reset key position: %w", err)
		}
		p := st.coll.Programs[entry]
		if p == nil {
			return nil, fmt.Errorf("%w: %s", ErrNoProgram, entry)
		}
		return &Case{Program: p, Input: defaultInput(ebpf.SocketFilter), Want: w}, nil
	}
}
