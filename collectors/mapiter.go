package collectors

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/link"
)

// mapRecordSize is the size of struct record in bpf/mapiter/mapiter.c.
const mapRecordSize = 16

// MapIter reads the kernel's element count of every map in one pass of a
// BPF iterator (bpf/mapiter): bpf_map_sum_elem_count, the per-CPU
// counters the hash family keeps as it inserts and deletes. It opens no
// map and reads no key. Like ProgIter it holds only its own program and
// link.
//
// Requires Linux 6.6 (bpf_map_sum_elem_count), kernel BTF, CAP_BPF and
// CAP_PERFMON.
type MapIter struct {
	objs mapiterObjects
	link *link.Iter
	buf  []byte
	// forget drops the program from this process's own (own.go).
	forget func()
}

// NewMapIter loads the iterator. Errors wrap ErrIterUnsupported when the
// kernel cannot run it and ErrNotPermitted when privileges are missing.
func NewMapIter() (*MapIter, error) {
	if err := iterKernel(6, 6, "bpf_map_sum_elem_count"); err != nil {
		return nil, err
	}
	it := &MapIter{}
	if err := loadMapiterObjects(&it.objs, nil); err != nil {
		return nil, iterLoadError(err)
	}
	it.forget = MarkOwn(it.objs.BpfperfMaps)
	var err error
	it.link, err = link.AttachIter(link.IterOptions{Program: it.objs.BpfperfMaps})
	if err != nil {
		it.objs.Close()
		return nil, iterLoadError(fmt.Errorf("create map iterator link: %w", err))
	}
	return it, nil
}

// Counts returns the kernel's element count of every map, by map id. Maps
// whose type keeps no count read 0.
func (it *MapIter) Counts() (map[uint32]int64, error) {
	if it.buf == nil {
		it.buf = make([]byte, 0, 16<<10)
	}
	data, err := readIter(it.link, it.buf, mapRecordSize)
	if err != nil {
		return nil, fmt.Errorf("map iterator: %w", err)
	}
	it.buf = data
	out := make(map[uint32]int64, len(data)/mapRecordSize)
	for ; len(data) >= mapRecordSize; data = data[mapRecordSize:] {
		out[binary.LittleEndian.Uint32(data)] = int64(binary.LittleEndian.Uint64(data[8:]))
	}
	return out, nil
}

// Close unloads the iterator.
func (it *MapIter) Close() error {
	return closeIter(it.link, &it.objs, it.forget)
}
