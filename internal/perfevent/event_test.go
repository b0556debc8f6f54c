package perfevent

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/elastic/go-perf"
	"golang.org/x/sys/unix"
)

func TestNames(t *testing.T) {
	for _, e := range All {
		got, err := Parse(strings.ToUpper(e.String()))
		if err != nil || got != e {
			t.Errorf("Parse(%q) = %v, %v", e, got, err)
		}
	}
	if _, err := Parse("bogus"); err == nil || !strings.Contains(err.Error(), "cpu-clock, cycles, instructions, llc-misses") {
		t.Errorf("Parse(bogus) = %v, want an error listing the events", err)
	}
	if Event(9).String() != "event(9)" {
		t.Errorf("Event(9) = %q", Event(9))
	}
}

// Every sampling event uses a clock the kernel accepts for NMI-driven
// events: with CLOCK_BOOTTIME a hardware event does not open.
func TestSamplingAttr(t *testing.T) {
	const format = unix.PERF_SAMPLE_IP | unix.PERF_SAMPLE_CALLCHAIN | unix.PERF_SAMPLE_CGROUP
	for _, e := range All {
		a, err := e.SamplingAttr(99, format)
		if err != nil {
			t.Fatal(err)
		}
		if a.Clockid != unix.CLOCK_MONOTONIC || a.Bits&unix.PerfBitUseClockID == 0 {
			t.Errorf("%v: clock %d, want CLOCK_MONOTONIC", e, a.Clockid)
		}
		c, _ := e.CountingAttr()
		if a.Type != uint32(c.Type) || a.Config != c.Config {
			t.Errorf("%v: type %d config %d, want the counting event's %d %d", e, a.Type, a.Config, c.Type, c.Config)
		}
		if a.Bits&unix.PerfBitDisabled == 0 || a.Bits&unix.PerfBitExcludeCallchainUser == 0 || a.Sample_type != format || a.Read_format != SampleReadFormat {
			t.Errorf("%v: %+v", e, a)
		}
		freq := a.Bits&unix.PerfBitFreq != 0
		switch {
		case e == CPUClock && (freq || a.Sample != uint64(1e9)/99):
			t.Errorf("cpu-clock: freq %v period %d, want a fixed period of 1/99 s", freq, a.Sample)
		case e != CPUClock && (!freq || a.Sample != 99):
			t.Errorf("%v: freq %v sample %d, want frequency mode at 99 Hz", e, freq, a.Sample)
		}
	}
	if _, err := Cycles.SamplingAttr(0, format); err == nil {
		t.Error("0 Hz: want an error")
	}
	for e, want := range map[Event]uint64{Cycles: unix.PERF_COUNT_HW_CPU_CYCLES, Instructions: unix.PERF_COUNT_HW_INSTRUCTIONS, LLCMisses: unix.PERF_COUNT_HW_CACHE_MISSES} {
		if a, _ := e.CountingAttr(); a.Type != perf.HardwareEvent || a.Config != want {
			t.Errorf("%v: type %v config %d", e, a.Type, a.Config)
		}
	}
}

func TestOpenErrorReasons(t *testing.T) {
	hasPMU := HasPMU
	t.Cleanup(func() { HasPMU = hasPMU })
	for _, tc := range []struct {
		e      Event
		errno  unix.Errno
		reason error
		words  string
		pmu    bool // whether cycles open here
	}{
		{Cycles, unix.ENOENT, ErrNoPMU, "no hardware PMU (ENOENT)", false},
		{LLCMisses, unix.ENODEV, ErrNoPMU, "no hardware PMU (ENODEV)", false},
		// A PMU without the event: arm64 under QEMU has no cache events.
		{LLCMisses, unix.ENOENT, ErrEventNotSupported, "llc-misses event on cpu 3: not supported by this PMU (ENOENT): this machine's PMU does not count llc-misses; the other events still count", true},
		{Instructions, unix.ENODEV, ErrEventNotSupported, "not supported by this PMU (ENODEV)", true},
		{Cycles, unix.ENOENT, ErrNoPMU, "no hardware PMU (ENOENT)", true},
		{Instructions, unix.EOPNOTSUPP, ErrPMURefused, "refused this event configuration (ENOTSUP)", false},
		{Cycles, unix.EINVAL, ErrPMURefused, "refused this event configuration (EINVAL)", false},
		{Cycles, unix.EBUSY, ErrCountersBusy, "busy with another tool (EBUSY)", false},
		{CPUClock, unix.EACCES, ErrNotPermitted, "CAP_PERFMON", false},
		{Cycles, unix.EPERM, ErrNotPermitted, "perf_event_paranoid", false},
		{CPUClock, unix.ENOENT, nil, "no such file", false},
	} {
		HasPMU = func() bool { return tc.pmu }
		err := NewOpenError(tc.e, 3, tc.errno)
		if tc.reason != nil && !errors.Is(err, tc.reason) {
			t.Errorf("%v %v: %v does not match %v", tc.e, tc.errno, err, tc.reason)
		}
		if !errors.Is(err, tc.errno) {
			t.Errorf("%v %v: %v does not match the errno", tc.e, tc.errno, err)
		}
		if !strings.Contains(err.Error(), tc.words) || !strings.Contains(err.Error(), "on cpu 3") {
			t.Errorf("%v %v: %q does not say %q and the cpu", tc.e, tc.errno, err, tc.words)
		}
	}
	if !errors.Is(NewOpenError(Cycles, 0, unix.ENOENT), ebpf.ErrNotSupported) || !errors.Is(ErrNoPMU, ebpf.ErrNotSupported) || !errors.Is(ErrEventNotSupported, ebpf.ErrNotSupported) {
		t.Error("no PMU does not match ebpf.ErrNotSupported")
	}
	if errors.Is(NewOpenError(Cycles, 0, unix.EBUSY), ebpf.ErrNotSupported) {
		t.Error("busy counters match ebpf.ErrNotSupported")
	}
}
