package collectors

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MapInfo is one reading of one map. JSON names follow bpftool's `map show
// -j` where bpftool has the field.
type MapInfo struct {
	ID         uint32 `json:"id"`
	Type       string `json:"type"` // bpftool's name, "type_N" if unknown
	TypeID     uint32 `json:"type_id"`
	Name       string `json:"name"`
	Flags      uint32 `json:"flags"`
	KeySize    uint32 `json:"bytes_key"`
	ValueSize  uint32 `json:"bytes_value"`
	MaxEntries uint32 `json:"max_entries"`
	// Memlock is the kernel's memory figure for the map, the "memlock"
	// line of its fdinfo, which `bpftool map show` prints.
	Memlock uint64 `json:"bytes_memlock"`
	// Entries is the number of entries, -1 where the type has no fill
	// level (Counted is "").
	Entries int64 `json:"entries"`
	// Counted says how: CountKernel or CountWalk.
	Counted string `json:"counted,omitempty"`
	// Partial: the walk stopped at the reading's key budget, so Entries is
	// a lower bound.
	Partial bool `json:"partial,omitempty"`
	// WalkTook is how long the walk of this map's keys took.
	WalkTook time.Duration `json:"walk_ns,omitempty"`
}

// Fill is Entries / MaxEntries, or -1 where the map has no fill level.
func (m MapInfo) Fill() float64 {
	if m.Entries < 0 || m.MaxEntries == 0 {
		return -1
	}
	return float64(m.Entries) / float64(m.MaxEntries)
}

// MapsOptions bound one reading of every map.
type MapsOptions struct {
	// Counts is the kernel's element count by map id (MapIter.Counts);
	// nil when the iterator does not run, and then the hash family is
	// walked too.
	Counts map[uint32]int64
	// WalkBudget is how many keys a reading may walk in all, over every
	// map counted by a walk; 0 means DefaultWalkBudget. A map whose walk
	// hits the budget reads Partial, and maps after it are not walked
	// (Entries -1, Partial).
	WalkBudget int
}

// DefaultWalkBudget is the keys one reading walks at most: about 10 ms of
// get-next-key calls on the machines we measured.
const DefaultWalkBudget = 50_000

// MapsCost is what one reading took.
type MapsCost struct {
	Maps   int           `json:"maps"`
	Took   time.Duration `json:"took_ns"`  // the whole reading
	Walked int           `json:"walked"`   // keys walked
	Walk   time.Duration `json:"walk_ns"`  // of which walking keys
	Counts time.Duration `json:"count_ns"` // the iterator's pass, set by the caller
}

// bpfMapInfo is the head of struct bpf_map_info (include/uapi/linux/bpf.h)
// up to the name: the kernel copies no more than the length we pass.
type bpfMapInfo struct {
	typ        uint32
	id         uint32
	keySize    uint32
	valueSize  uint32
	maxEntries uint32
	mapFlags   uint32
	name       [16]byte
}

var (
	_ [40 - unsafe.Sizeof(bpfMapInfo{})]byte
	_ [unsafe.Sizeof(bpfMapInfo{}) - 40]byte
)

// ReadMaps reads every map on the host, in id order. Each map is opened
// by id, read (info, fdinfo memlock, and a walk of its keys where that is
// how it is counted) and closed before the next: no map fd outlives its
// reading. Maps that go away meanwhile are left out.
func ReadMaps(opts MapsOptions) ([]MapInfo, MapsCost, error) {
	start := time.Now()
	budget := opts.WalkBudget
	if budget <= 0 {
		budget = DefaultWalkBudget
	}
	var out []MapInfo
	var cost MapsCost
	for id := uint32(0); ; {
		next, ok, err := nextID(unix.BPF_MAP_GET_NEXT_ID, id)
		if err != nil {
			return out, cost, fmt.Errorf("read maps: %w", err)
		}
		if !ok {
			break
		}
		id = next
		m, walked, err := readMap(id, opts.Counts, budget-cost.Walked)
		if errors.Is(err, ErrGone) {
			continue
		}
		if err != nil {
			return out, cost, fmt.Errorf("read maps: %w", err)
		}
		cost.Walked += walked
		cost.Walk += m.WalkTook
		out = append(out, m)
	}
	cost.Maps, cost.Took = len(out), time.Since(start)
	return out, cost, nil
}

// readMap opens map id, reads it within budget keys, and closes it.
func readMap(id uint32, counts map[uint32]int64, budget int) (MapInfo, int, error) {
	fd, err := fdByID(unix.BPF_MAP_GET_FD_BY_ID, id)
	if err != nil {
		return MapInfo{}, 0, err
	}
	defer closeFD(fd)
	var info bpfMapInfo
	if err := objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info))); err != nil {
		return MapInfo{}, 0, fmt.Errorf("map %d: %w", id, err)
	}
	m := MapInfo{
		ID: info.id, TypeID: info.typ, Type: MapTypeName(info.typ), Name: cString(info.name[:]),
		Flags: info.mapFlags, KeySize: info.keySize, ValueSize: info.valueSize, MaxEntries: info.maxEntries,
		Entries: -1,
	}
	m.Memlock, err = fdinfoUint("/proc/self/fdinfo/"+strconv.Itoa(fd), "memlock:")
	if err != nil {
		return MapInfo{}, 0, fmt.Errorf("map %d memlock: %w", id, err)
	}
	m.Counted = fillCount(info.typ, counts != nil)
	switch m.Counted {
	case CountKernel:
		if n, ok := counts[id]; ok {
			m.Entries = n
		} else {
			m.Counted = "" // created after the iterator's pass: next reading
		}
	case CountWalk:
		if budget <= 0 {
			m.Partial = true
			return m, 0, nil
		}
		t := time.Now()
		n, done, err := walkKeys(fd, info.keySize, budget)
		m.WalkTook = time.Since(t)
		if err != nil {
			return MapInfo{}, 0, fmt.Errorf("map %d: %w", id, err)
		}
		m.Entries, m.Partial = int64(n), !done
		return m, n, nil
	}
	return m, 0, nil
}

// mapKeyAttr is the bpf_attr layout of BPF_MAP_GET_NEXT_KEY.
type mapKeyAttr struct {
	fd      uint32
	_       uint32
	key     unsafe.Pointer
	nextKey unsafe.Pointer
}

// walkKeys counts a map's keys with BPF_MAP_GET_NEXT_KEY, at most limit of
// them; done is false when it stopped at the limit.
//
// A key deleted while we walk restarts the kernel's walk from the first
// key (hash maps) and can count keys twice; a walk is a figure of the
// moment, as `bpftool map dump | wc -l` is.
func walkKeys(fd int, keySize uint32, limit int) (n int, done bool, err error) {
	if keySize == 0 {
		return 0, true, nil
	}
	cur := make([]byte, keySize)
	next := make([]byte, keySize)
	attr := mapKeyAttr{fd: uint32(fd), key: nil, nextKey: unsafe.Pointer(&next[0])}
	for {
		_, err := bpf(unix.BPF_MAP_GET_NEXT_KEY, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		if err == unix.ENOENT {
			return n, true, nil
		}
		if err != nil {
			return n, false, wrapErrno("get next key", err)
		}
		if n == limit {
			return n, false, nil // one key past the limit: there are more
		}
		n++
		cur, next = next, cur
		attr.key, attr.nextKey = unsafe.Pointer(&cur[0]), unsafe.Pointer(&next[0])
	}
}
