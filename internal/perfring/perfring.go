// Package perfring maps a perf event's ring buffer and reads its records
// by hand. go-perf, which the project uses for counting events, reads only
// events it opened and wants samples; bpfperf reads sampling events that
// carry PERF_SAMPLE_CGROUP (profile) and dummy events that make side-band
// records only (collectors/loadrec).
package perfring

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is one perf event on one CPU and its mapped ring buffer.
type Ring struct {
	FD   int
	CPU  int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
	buf  []byte // a record that wraps around the end of data
}

// Map maps pages pages of ring (a power of two) after the control page of
// the event fd opened on cpu. It takes fd: on failure fd is closed.
func Map(fd, cpu, pages int) (*Ring, error) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+pages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("map ring on cpu %d: %w", cpu, err)
	}
	return &Ring{
		FD:   fd,
		CPU:  cpu,
		mem:  mem,
		meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0])),
		data: mem[page:],
	}, nil
}

// Read passes every record between tail and head to fn, its type and its
// data after the 8-byte header, and frees their room. data is valid only
// during the call: fn copies what it keeps.
func (r *Ring) Read(fn func(typ uint32, data []byte)) {
	head := atomic.LoadUint64(&r.meta.Data_head)
	tail := atomic.LoadUint64(&r.meta.Data_tail)
	size := uint64(len(r.data))
	for tail < head {
		hdr := r.bytes(tail, 8, size)
		typ := binary.NativeEndian.Uint32(hdr)
		n := uint64(binary.NativeEndian.Uint16(hdr[6:]))
		if n < 8 || tail+n > head {
			break // cannot happen with a sane kernel; drop the rest
		}
		fn(typ, r.bytes(tail, n, size)[8:])
		tail += n
	}
	atomic.StoreUint64(&r.meta.Data_tail, head)
}

// Pending is how many bytes of records the ring holds, unread; Size its
// room.
func (r *Ring) Pending() uint64 {
	return atomic.LoadUint64(&r.meta.Data_head) - atomic.LoadUint64(&r.meta.Data_tail)
}

// Size is the ring's room for records, in bytes.
func (r *Ring) Size() uint64 { return uint64(len(r.data)) }

// Skip drops whatever the ring holds.
func (r *Ring) Skip() {
	atomic.StoreUint64(&r.meta.Data_tail, atomic.LoadUint64(&r.meta.Data_head))
}

// bytes returns n bytes at offset off of the ring, copied into r.buf when
// they wrap around its end.
func (r *Ring) bytes(off, n, size uint64) []byte {
	start := off % size
	if start+n <= size {
		return r.data[start : start+n]
	}
	if uint64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	k := copy(b, r.data[start:])
	copy(b[k:], r.data)
	return b
}

// Close unmaps the ring and closes the event.
func (r *Ring) Close() error {
	err := unix.Munmap(r.mem)
	if cerr := unix.Close(r.FD); err == nil {
		err = cerr
	}
	return err
}

// OnlineCPUs parses sysRoot/devices/system/cpu/online ("0-3,6"): the CPUs
// an event per CPU is opened on.
func OnlineCPUs(sysRoot string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(sysRoot, "devices/system/cpu/online"))
	if err != nil {
		return nil, fmt.Errorf("online cpus: %w", err)
	}
	var cpus []int
	for part := range strings.SplitSeq(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("online cpus %q: %w", b, err)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("online cpus %q: %w", b, err)
			}
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("online cpus %q: none", b)
	}
	return cpus, nil
}
