package bench

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

func helperTests() []Test {
	fix := &fixture{open: func() (any, func(), error) {
		spec, err := loadHelpers()
		if err != nil {
			return nil, nil, err
		}
		delete(spec.Maps, "rb")
		for name := range spec.Programs {
			if len(name) > 8 && name[:8] == "ringbuf_" {
				delete(spec.Programs, name)
			}
		}
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("load helper programs: %w", err)
		}
		return coll, func() { coll.Close() }, nil
	}}
	var tests []Test
	for _, h := range []struct {
		entry, doc string
		typ        ebpf.ProgramType
		want       uint32
		noisy      bool
	}{
		{"ktime_get_ns", "bpf_ktime_get_ns", ebpf.SocketFilter, 0, false},
		{"ktime_get_boot_ns", "bpf_ktime_get_boot_ns", ebpf.SocketFilter, 0, false},
		{"get_prandom_u32", "bpf_get_prandom_u32", ebpf.SocketFilter, 0, false},
		{"get_smp_processor_id", "bpf_get_smp_processor_id", ebpf.SocketFilter, 0, false},
		{"xdp_adjust_head", "bpf_xdp_adjust_head twice (-4, +4) so the buffer stays in bounds", ebpf.XDP, 2 /* XDP_PASS */, false},
		{"trace_printk", "bpf_trace_printk to the trace pipe: noisy, and it fills the trace buffer", ebpf.SocketFilter, 0, true},
		{"spin_lock", "bpf_spin_lock, increment, bpf_spin_unlock on a map value (tc)", ebpf.SchedCLS, 0, false},
	} {
		tests = append(tests, Test{
			Name:    "helpers/" + h.entry,
			Group:   "helpers",
			Entry:   h.entry,
			Doc:     h.doc,
			Noisy:   h.noisy,
			Labels:  map[string]string{"helper": h.entry},
			Quick:   !h.noisy,
			fixture: fix,
			prepare: func(state any) (*Case, error) {
				coll := state.(*ebpf.Collection)
				return &Case{Program: coll.Programs[h.entry], Input: defaultInput(h.typ), Want: want(h.want)}, nil
			},
		})
	}
	return tests
}

// RingbufSizes are the record sizes of the ring buffer tests.
var RingbufSizes = []int{8, 64, 256, 1024, 4096}

type ringState struct {
	coll *ebpf.Collection
	rd   *ringbuf.Reader
	size int // bytes in the ring
	rec  ringbuf.Record
}

// drain consumes every record so the next measurement starts on an empty
// ring and never measures the "ring full" path.
func (s *ringState) drain() error {
	s.rd.SetDeadline(time.Now())
	for {
		err := s.rd.ReadInto(&s.rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("drain ring buffer: %w", err)
		}
	}
}

func ringbufTests() []Test {
	fix := &fixture{open: func() (any, func(), error) {
		spec, err := loadHelpers()
		if err != nil {
			return nil, nil, err
		}
		for name := range spec.Programs {
			if len(name) < 8 || name[:8] != "ringbuf_" {
				delete(spec.Programs, name)
			}
		}
		delete(spec.Maps, "locks")
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("load ring buffer programs: %w", err)
		}
		rd, err := ringbuf.NewReader(coll.Maps["rb"])
		if err != nil {
			coll.Close()
			return nil, nil, fmt.Errorf("ring buffer reader: %w", err)
		}
		st := &ringState{coll: coll, rd: rd, size: int(spec.Maps["rb"].MaxEntries)}
		return st, func() { rd.Close(); coll.Close() }, nil
	}}
	var tests []Test
	for _, kind := range []string{"output", "reserve"} {
		for _, n := range RingbufSizes {
			entry := fmt.Sprintf("ringbuf_%s_%d", kind, n)
			doc := "bpf_ringbuf_output of a record from a map value, no wakeup"
			if kind == "reserve" {
				doc = "bpf_ringbuf_reserve + bpf_ringbuf_submit, no copy, no wakeup"
			}
			tests = append(tests, Test{
				Name:    fmt.Sprintf("ringbuf/%s/bytes=%d", kind, n),
				Group:   "ringbuf",
				Entry:   entry,
				Doc:     doc,
				Labels:  map[string]string{"op": kind, "bytes": fmt.Sprint(n)},
				Quick:   n == 64 || n == 4096,
				fixture: fix,
				prepare: func(state any) (*Case, error) {
					st := state.(*ringState)
					// Each record takes an 8-byte header, rounded to 8.
					per := (n + 8 + 7) &^ 7
					return &Case{
						Program:   st.coll.Programs[entry],
						Input:     defaultInput(ebpf.SocketFilter),
						Want:      want(0),
						MaxRepeat: st.size/per - 1,
						Before:    st.drain,
					}, nil
				},
			})
		}
	}
	return tests
}
