package profile

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// ring is one CPU's sampling event and its mmap'ed ring buffer.
type ring struct {
	fd   int
	cpu  int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
	buf  []byte // a record that wraps around the end of data
}

func openRing(e perfevent.Event, attr *unix.PerfEventAttr, cpu, pages int) (*ring, error) {
	fd, err := perfevent.Open(e, attr, cpu)
	if err != nil {
		return nil, err
	}
	page := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+pages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mmap ring: %w", err)
	}
	return &ring{
		fd:   fd,
		cpu:  cpu,
		mem:  mem,
		meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0])),
		data: mem[page:],
	}, nil
}

func (r *ring) enable() error {
	if err := unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("enable event on cpu %d: %w", r.cpu, err)
	}
	return nil
}

func (r *ring) disable() {
	unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
}

// setFrequency changes a frequency-mode event's samples per second.
func (r *ring) setFrequency(hz int) error {
	v := uint64(hz)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(r.fd), unix.PERF_EVENT_IOC_PERIOD, uintptr(unsafe.Pointer(&v)))
	if errno != 0 {
		return fmt.Errorf("set frequency on cpu %d: %w", r.cpu, errno)
	}
	return nil
}

// times are the event's total time enabled and time running on the PMU
// (perfevent.ReadFormat), in ns.
type times struct{ enabled, running uint64 }

func (r *ring) times() times {
	var b [24]byte // value, time enabled, time running
	if n, err := unix.Read(r.fd, b[:]); err != nil || n != len(b) {
		return times{}
	}
	return times{enabled: binary.NativeEndian.Uint64(b[8:]), running: binary.NativeEndian.Uint64(b[16:])}
}

func (r *ring) close() error {
	err := unix.Munmap(r.mem)
	if cerr := unix.Close(r.fd); err == nil {
		err = cerr
	}
	return err
}

// skip drops whatever the ring holds.
func (r *ring) skip() {
	atomic.StoreUint64(&r.meta.Data_tail, atomic.LoadUint64(&r.meta.Data_head))
}

// Offsets in a PERF_RECORD_SAMPLE with our sample_type
// (IP|TID|TIME|CPU|PERIOD|CALLCHAIN), after the 8-byte header.
const (
	offIP     = 8
	offPID    = 16
	offTID    = 20
	offTime   = 24
	offCPU    = 32
	offPeriod = 40
	offNr     = 48
	offIPs    = 56
)

// read decodes every record between tail and head into c and frees their
// room.
func (r *ring) read(d *decoder, c *Capture) {
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
		rec := r.bytes(tail, n, size)
		switch typ {
		case unix.PERF_RECORD_SAMPLE:
			if s, ok := d.sample(rec); ok {
				c.Samples = append(c.Samples, s)
			}
		case unix.PERF_RECORD_LOST:
			if len(rec) >= 24 {
				c.Lost += binary.NativeEndian.Uint64(rec[16:])
			}
		case unix.PERF_RECORD_THROTTLE:
			c.Throttled++
		}
		tail += n
	}
	atomic.StoreUint64(&r.meta.Data_tail, head)
}

// bytes returns n bytes at offset off of the ring, copied into r.buf when
// they wrap around its end.
func (r *ring) bytes(off, n, size uint64) []byte {
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

// decoder turns raw samples into Samples, sharing identical stacks and
// looking each thread's name up once.
type decoder struct {
	procRoot string
	toBoot   uint64 // added to sample times: see bootOffset
	stacks   map[string][]uint64
	fresh    [][]uint64 // stacks in the order first seen
	comms    map[uint32]string
}

func newDecoder(procRoot string) *decoder {
	return &decoder{procRoot: procRoot, stacks: map[string][]uint64{}, comms: map[uint32]string{}}
}

func (d *decoder) sample(rec []byte) (Sample, bool) {
	if len(rec) < offIPs {
		return Sample{}, false
	}
	ne := binary.NativeEndian
	nr := ne.Uint64(rec[offNr:])
	if nr > uint64(len(rec)-offIPs)/8 {
		return Sample{}, false
	}
	s := Sample{
		Time:   ne.Uint64(rec[offTime:]) + d.toBoot,
		CPU:    ne.Uint32(rec[offCPU:]),
		PID:    ne.Uint32(rec[offPID:]),
		TID:    ne.Uint32(rec[offTID:]),
		Period: ne.Uint64(rec[offPeriod:]),
	}
	raw := rec[offIPs : offIPs+8*nr]
	st, ok := d.stacks[string(raw)]
	if !ok {
		st = make([]uint64, 0, nr)
		for i := range nr {
			ip := ne.Uint64(raw[8*i:])
			if ip >= contextMax {
				continue // PERF_CONTEXT_KERNEL and friends mark sections
			}
			st = append(st, ip)
		}
		if len(st) == 0 {
			st = nil
		}
		d.stacks[string(raw)] = st
		d.fresh = append(d.fresh, st)
	}
	s.Stack = st
	s.Comm = d.comm(s.PID, s.TID)
	return s, true
}

func (d *decoder) comm(pid, tid uint32) string {
	if c, ok := d.comms[tid]; ok {
		return c
	}
	c := "swapper"
	if tid != 0 {
		p, t := strconv.FormatUint(uint64(pid), 10), strconv.FormatUint(uint64(tid), 10)
		b, err := os.ReadFile(d.procRoot + "/" + p + "/task/" + t + "/comm")
		if err != nil {
			b, err = os.ReadFile(d.procRoot + "/" + t + "/comm")
		}
		if err != nil {
			c = "[exited]"
		} else {
			c = strings.TrimSuffix(string(b), "\n")
		}
	}
	d.comms[tid] = c
	return c
}

// contextMax is PERF_CONTEXT_MAX as an address: callchain entries at or
// above it mark where kernel, user or guest frames begin.
const contextMax = uint64(1<<64 + unix.PERF_CONTEXT_MAX)
