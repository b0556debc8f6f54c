package profile

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// ring is one CPU's sampling event and its mapped ring buffer (go-perf's).
type ring struct {
	ev  *perf.Event
	cpu int
	raw perf.RawRecord
}

func openRing(e perfevent.Event, attr *perf.Attr, cpu, pages int) (*ring, error) {
	ev, err := perfevent.Open(e, attr, cpu)
	if err != nil {
		return nil, err
	}
	if err := ev.MapRingNumPages(pages); err != nil {
		ev.Close()
		return nil, fmt.Errorf("map ring on cpu %d: %w", cpu, err)
	}
	return &ring{ev: ev, cpu: cpu}, nil
}

func (r *ring) enable() error {
	if err := r.ev.Enable(); err != nil {
		return fmt.Errorf("enable event on cpu %d: %w", r.cpu, err)
	}
	return nil
}

func (r *ring) disable() { r.ev.Disable() }

// setFrequency changes a frequency-mode event's samples per second.
func (r *ring) setFrequency(hz int) error {
	if err := r.ev.UpdatePeriod(uint64(hz)); err != nil {
		return fmt.Errorf("set frequency on cpu %d: %w", r.cpu, err)
	}
	return nil
}

func (r *ring) close() error { return r.ev.Close() }

// times are the event's total time enabled and time running on the PMU,
// in ns.
type times struct{ enabled, running uint64 }

func (r *ring) times() times {
	c, err := r.ev.ReadCount()
	if err != nil {
		return times{}
	}
	return times{enabled: uint64(c.Enabled), running: uint64(c.Running)}
}

// next reads the next record without waiting: false when the ring is
// empty. The record's data is valid until the next call.
func (r *ring) next() bool {
	// With a record there, ReadRawRecord returns it at once; without one
	// (or with a ring it finds damaged and resets) an expired context
	// makes it return instead of polling, so a drain never blocks.
	return r.ev.ReadRawRecord(expired, &r.raw) == nil
}

// expired is a context whose deadline has passed.
var expired = func() context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	return ctx
}()

// skip drops whatever the ring holds.
func (r *ring) skip() {
	for r.next() {
	}
}

// Offsets in a sample record's data (after the 8-byte header) with the
// sampler's format (IP|TID|TIME|CPU|PERIOD|CALLCHAIN).
const (
	offIP     = 0
	offPID    = 8
	offTID    = 12
	offTime   = 16
	offCPU    = 24
	offPeriod = 32
	offNr     = 40
	offIPs    = 48
)

// read decodes every record in the ring into c and frees their room.
func (r *ring) read(d *decoder, c *Capture) {
	for r.next() {
		d.record(c, r.raw.Header.Type, r.raw.Data)
	}
}

// record adds one record (its data, after the header) to c: a sample, a
// count of samples the kernel lost, or a throttle.
func (d *decoder) record(c *Capture, typ perf.RecordType, data []byte) {
	switch typ {
	case perf.RecordTypeSample:
		if s, ok := d.sample(data); ok {
			c.Samples = append(c.Samples, s)
		}
	case perf.RecordTypeLost:
		if len(data) >= 16 { // id, lost
			c.Lost += binary.NativeEndian.Uint64(data[8:])
		}
	case perf.RecordTypeThrottle:
		c.Throttled++
	}
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
