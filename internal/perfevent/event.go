// Package perfevent is the one definition of the perf events bpfperf
// counts and samples: cpu-clock, which every kernel has, and the hardware
// events cycles, instructions and LLC misses, which need a PMU. The
// profiler's samplers, the exact mechanism's counting events and the
// store's event columns all use this order and these attributes.
//
// It also says why an event did not open, in words a user can act on
// (OpenError), since perf_event_open answers with a bare errno. Counting
// events are opened and read through github.com/elastic/go-perf; the
// profiler's sampling events are opened here and mapped by the profiler,
// for the one sample field go-perf cannot ask for (see SamplingAttr).
package perfevent

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/elastic/go-perf"
	"golang.org/x/sys/unix"
)

// Event is a perf event bpfperf counts or samples. The values are stable:
// the store's counter columns are in this order.
type Event uint8

const (
	// CPUClock is the software cpu-clock event, in nanoseconds of CPU time.
	// Every kernel has it.
	CPUClock Event = iota
	// Cycles is the hardware CPU-cycles event. It needs a PMU.
	Cycles
	// Instructions is the hardware instructions-retired event. It needs a
	// PMU.
	Instructions
	// LLCMisses is the hardware cache-misses event, which perf calls
	// cache-misses: last-level cache misses on most CPUs. It needs a PMU.
	LLCMisses
)

// All lists every event, in store column order.
var All = []Event{CPUClock, Cycles, Instructions, LLCMisses}

var names = [...]string{
	CPUClock:     "cpu-clock",
	Cycles:       "cycles",
	Instructions: "instructions",
	LLCMisses:    "llc-misses",
}

func (e Event) String() string {
	if int(e) < len(names) {
		return names[e]
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// Parse parses a name as String prints it (case does not matter).
func Parse(name string) (Event, error) {
	for e, n := range names {
		if strings.EqualFold(name, n) {
			return Event(e), nil
		}
	}
	return 0, fmt.Errorf("perf event %q: want one of %s", name, strings.Join(names[:], ", "))
}

// Hardware reports whether the event needs a hardware PMU.
func (e Event) Hardware() bool { return e != CPUClock }

// Unit is what one count of the event stands for in a pprof value type:
// "nanoseconds" for cpu-clock, "count" for the hardware events.
func (e Event) Unit() string {
	if e == CPUClock {
		return "nanoseconds"
	}
	return "count"
}

// configurator is the event as go-perf defines it.
func (e Event) configurator() (perf.Configurator, error) {
	switch e {
	case CPUClock:
		return perf.CPUClock, nil
	case Cycles:
		return perf.CPUCycles, nil
	case Instructions:
		return perf.Instructions, nil
	case LLCMisses:
		// The generic cache-misses event rather than the LL cache
		// read-miss one: AMD's PMUs have no LL entry in the cache event
		// table, and perf stat -e cache-misses counts there.
		return perf.CacheMisses, nil
	}
	return nil, fmt.Errorf("unknown perf event %d", e)
}

// CountingAttr is the attribute of a counting event (no samples), read
// with read(2) or bpf_perf_event_read_value.
func (e Event) CountingAttr() (*perf.Attr, error) {
	c, err := e.configurator()
	if err != nil {
		return nil, err
	}
	attr := new(perf.Attr)
	if err := c.Configure(attr); err != nil {
		return nil, err
	}
	return attr, nil
}

// SampleClock is the clock of sample times. Hardware events fire from an
// NMI, and the kernel accepts only NMI-safe clocks for them
// (perf_event_set_clock: CLOCK_MONOTONIC and CLOCK_MONOTONIC_RAW;
// CLOCK_BOOTTIME gives EINVAL), so every event samples on CLOCK_MONOTONIC
// and callers that need another clock map the times onto it.
const SampleClock = unix.CLOCK_MONOTONIC

// SampleReadFormat is what a read(2) of a sampling event returns: the
// count, then the time it was enabled and the time it ran, so a
// multiplexed event's share of the window can be told.
const SampleReadFormat = unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING

// SamplingAttr is the attribute of a disabled, system-wide sampling event
// with kernel call chains, whose reads give SampleReadFormat. cpu-clock
// samples at a fixed period of 1/hz seconds, so every sample stands for
// the same time; hardware events in frequency mode, where the kernel
// varies the period to keep hz and each sample records its own.
// sampleType is the PERF_SAMPLE_* set the caller decodes.
//
// It is the kernel's own struct, not go-perf's Attr, because go-perf
// (at the version this module can use) encodes only the first 20 sample
// bits: PERF_SAMPLE_CGROUP, bit 21, which says whose work a sample
// interrupted, cannot be asked for through it.
func (e Event) SamplingAttr(hz int, sampleType uint64) (*unix.PerfEventAttr, error) {
	if hz <= 0 {
		return nil, fmt.Errorf("%v: sampling frequency %d Hz", e, hz)
	}
	c, err := e.CountingAttr()
	if err != nil {
		return nil, err
	}
	attr := &unix.PerfEventAttr{
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Type:        uint32(c.Type),
		Config:      c.Config,
		Sample_type: sampleType,
		Read_format: SampleReadFormat,
		Bits: unix.PerfBitDisabled | unix.PerfBitExcludeHv |
			unix.PerfBitExcludeCallchainUser | unix.PerfBitUseClockID,
		Clockid: SampleClock,
	}
	if e == CPUClock {
		attr.Sample = uint64(time.Second) / uint64(hz)
	} else {
		attr.Bits |= unix.PerfBitFreq
		attr.Sample = uint64(hz)
	}
	return attr, nil
}

// OpenSampling opens a SamplingAttr on one CPU for every task and
// classifies a failure (see OpenError). The caller maps its ring.
func OpenSampling(e Event, attr *unix.PerfEventAttr, cpu int) (int, error) {
	fd, err := unix.PerfEventOpen(attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, NewOpenError(e, cpu, err)
	}
	return fd, nil
}

// Open opens attr on one CPU for every task, and classifies a failure
// (see OpenError).
func Open(e Event, attr *perf.Attr, cpu int) (*perf.Event, error) {
	ev, err := perf.Open(attr, perf.AllThreads, cpu, nil)
	if err != nil {
		return nil, NewOpenError(e, cpu, err)
	}
	return ev, nil
}
