// Package kfilter keeps the profiler's perf samples that cannot be of BPF
// code from reaching user space: a perf_event program (bpf/kfilter) on
// each sampling event passes only the samples whose kernel call chain has
// a frame on a page the caller named (SetRanges: JIT images, trampolines,
// dispatchers, the hooks' kernel functions). On an idle host nearly every
// sample lands elsewhere, and a dropped sample is never written, never
// wakes a reader and is never parsed.
//
// The kernel writes a sample only when the program returns non-zero
// (kernel/events/core.c, bpf_overflow_handler). It does not run the
// program, and drops the sample, while another program that runs under
// bpf_prog_active is on the CPU: kprobe, tracepoint and perf_event
// programs (trace_call_bpf), and the bpf(2) map calls. Counts says how
// many such samples were lost (Taken less Passed and Dropped); the
// profiler turns the filter off while a tracing program is loaded.
//
// Requires Linux 4.9 (PERF_EVENT_IOC_SET_BPF on a software event), 4.18
// (bpf_get_stack) and CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN.
package kfilter

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// MaxPages is the most pages the filter holds. Tiny programs share pages
// (the JIT packs them), so 10,000 socket filters take a few hundred. A
// set that does not fit turns the filter into a pass-all (Full).
const MaxPages = 1 << 15

const pageShift = 12

var (
	// ErrNotSupported: the kernel refused the filter (too old, no
	// CAP_BPF/CAP_PERFMON, an event that takes no program). Sampling
	// goes on unfiltered.
	ErrNotSupported = errors.New("kernel sample filter not supported")
)

// Range is kernel code from Start up to End (exclusive).
type Range struct{ Start, End uint64 }

// Counts are what the filter saw, summed over CPUs since it loaded.
type Counts struct {
	Passed  uint64 // samples let through to the ring
	Dropped uint64 // samples kept out
}

// Filter is the loaded program and its maps. Attach it to any number of
// sampling events; Close detaches it from none (an event lets its
// program go when it closes) but releases the filter's own hold.
type Filter struct {
	objs kfilterObjects
	id   uint32

	mu    sync.Mutex
	pages map[uint64]bool // what the kernel map holds
	full  bool
}

// Load loads the filter with an empty page set (it drops every sample in
// the kernel until SetRanges). A kernel or a process that cannot load it
// fails with an error matching ErrNotSupported.
func Load() (*Filter, error) {
	spec, err := loadKfilter()
	if err != nil {
		return nil, fmt.Errorf("kfilter spec: %w", err)
	}
	spec.Maps["pages"].MaxEntries = MaxPages
	f := &Filter{pages: map[uint64]bool{}}
	if err := spec.LoadAndAssign(&f.objs, nil); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: load: %w", ErrNotSupported, err)
		}
		return nil, fmt.Errorf("load kfilter: %w", err)
	}
	if info, err := f.objs.BpfperfKfilter.Info(); err == nil {
		if id, ok := info.ID(); ok {
			f.id = uint32(id)
			loaded.Lock()
			loaded.ids[f.id] = true
			loaded.Unlock()
		}
	}
	return f, nil
}

// loaded are the ids of the filters this process holds: perf_event
// programs, like those whose runs make the kernel drop filtered samples,
// but which never run under another one.
var loaded = struct {
	sync.Mutex
	ids map[uint32]bool
}{ids: map[uint32]bool{}}

// Ours reports whether program id is a filter this process loaded and
// has not closed.
func Ours(id uint32) bool {
	loaded.Lock()
	defer loaded.Unlock()
	return loaded.ids[id]
}

// Program is the filter program, for its id and bpf_stats.
func (f *Filter) Program() *ebpf.Program { return f.objs.BpfperfKfilter }

// Attach sets the filter on a sampling perf event (PERF_EVENT_IOC_SET_BPF).
// An event that refuses it fails with an error matching ErrNotSupported.
func (f *Filter) Attach(eventFD int) error {
	if err := unix.IoctlSetInt(eventFD, unix.PERF_EVENT_IOC_SET_BPF, f.objs.BpfperfKfilter.FD()); err != nil {
		return fmt.Errorf("%w: set bpf on perf event: %w", ErrNotSupported, err)
	}
	return nil
}

// SetRanges makes the filter pass samples with a frame in any of rs (to
// the page) and no others: the pages no range covers any more are
// removed. A set of more than MaxPages pages makes the filter pass every
// sample (Full) until a smaller set is given.
func (f *Filter) SetRanges(rs []Range) error {
	want := make(map[uint64]bool, len(f.pages))
	for _, r := range rs {
		if r.End <= r.Start {
			continue
		}
		for p := r.Start >> pageShift; p <= (r.End-1)>>pageShift; p++ {
			want[p] = true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(want) > MaxPages {
		return f.setFull(true)
	}
	var add, del []uint64
	for p := range want {
		if !f.pages[p] {
			add = append(add, p)
		}
	}
	for p := range f.pages {
		if !want[p] {
			del = append(del, p)
		}
	}
	// Add before removing, and leave pass-all last: a page that stays
	// wanted is never missing.
	one := uint8(1)
	for _, p := range add {
		if err := f.objs.Pages.Update(p, one, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("kfilter add page: %w", err)
		}
		f.pages[p] = true
	}
	if err := f.setFull(false); err != nil {
		return err
	}
	for _, p := range del {
		if err := f.objs.Pages.Delete(p); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("kfilter remove page: %w", err)
		}
		delete(f.pages, p)
	}
	return nil
}

// AddRanges makes the filter pass samples with a frame in any of rs too,
// keeping the pages it has: what a program learned since the last
// SetRanges adds, one map update per new page rather than a rebuild of
// every page (SetRanges at each program learned cost a daemon among
// 10,000 programs more than its sweeps). A set that grows past MaxPages
// makes the filter pass every sample (Full) until SetRanges gives a
// smaller one.
func (f *Filter) AddRanges(rs []Range) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return nil
	}
	one := uint8(1)
	for _, r := range rs {
		if r.End <= r.Start {
			continue
		}
		for p := r.Start >> pageShift; p <= (r.End-1)>>pageShift; p++ {
			if f.pages[p] {
				continue
			}
			if len(f.pages) >= MaxPages {
				return f.setFull(true)
			}
			if err := f.objs.Pages.Update(p, one, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("kfilter add page: %w", err)
			}
			f.pages[p] = true
		}
	}
	return nil
}

func (f *Filter) setFull(full bool) error {
	if f.full == full {
		return nil
	}
	v := uint32(0)
	if full {
		v = 1
	}
	if err := f.objs.Config.Put(uint32(0), v); err != nil {
		return fmt.Errorf("kfilter pass-all: %w", err)
	}
	f.full = full
	return nil
}

// Pages is how many pages the filter passes; Full whether it passes
// every sample because they did not fit.
func (f *Filter) Pages() (n int, full bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pages), f.full
}

// Counts reads the passed and dropped counts, summed over CPUs.
func (f *Filter) Counts() (Counts, error) {
	var c Counts
	for k, dst := range []*uint64{&c.Passed, &c.Dropped} {
		var per []uint64
		if err := f.objs.Counts.Lookup(uint32(k), &per); err != nil {
			return Counts{}, fmt.Errorf("kfilter counts: %w", err)
		}
		for _, v := range per {
			*dst += v
		}
	}
	return c, nil
}

// Close releases the program and maps; events it is attached to keep
// their reference until they close.
func (f *Filter) Close() error {
	loaded.Lock()
	delete(loaded.ids, f.id)
	loaded.Unlock()
	return f.objs.Close()
}
