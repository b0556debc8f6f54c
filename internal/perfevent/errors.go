package perfevent

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Why an event did not open. An *OpenError matches one of them.
var (
	// ErrNoPMU: the machine (or the VM) exposes no hardware PMU, so
	// hardware events do not exist here (ENOENT, ENODEV). A normal state:
	// cpu-clock works everywhere.
	// It also matches ebpf.ErrNotSupported.
	ErrNoPMU error = notSupported("no hardware PMU")
	// ErrEventNotSupported: the machine has a PMU, but it does not count
	// this event (ENOENT, ENODEV for it while cycles open): QEMU's arm64
	// PMU has no cache events, and real PMUs lack some generic events.
	// The other events still count. It also matches ebpf.ErrNotSupported.
	ErrEventNotSupported error = notSupported("not supported by this PMU")
	// ErrPMURefused: a PMU exists but refused this configuration
	// (EOPNOTSUPP, EINVAL): sampling interrupts, the clock or the event
	// are not supported by it.
	ErrPMURefused = errors.New("the PMU refused this event configuration")
	// ErrCountersBusy: the PMU's counters are taken by another user
	// (EBUSY): perf, another profiler, the NMI watchdog.
	ErrCountersBusy = errors.New("hardware counters busy with another tool")
	// ErrNotPermitted: the kernel refused the caller (EACCES, EPERM):
	// no CAP_PERFMON, kernel.perf_event_paranoid, or a container's policy.
	ErrNotPermitted = errors.New("not permitted to open perf events")
)

// OpenError is a perf_event_open failure of one event on one CPU. It
// matches its Reason (one of the errors above, or nil when the errno
// says nothing more) and the errno with errors.Is.
type OpenError struct {
	Event  Event
	CPU    int
	Reason error
	Errno  unix.Errno
	// Hint says what to do about it, in words; may be empty.
	Hint string
}

// NewOpenError classifies err, perf_event_open's answer for e on cpu.
// ENOENT for a hardware event is ErrNoPMU where cycles do not open
// either, ErrEventNotSupported where they do (see HasPMU).
func NewOpenError(e Event, cpu int, err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("open %v event on cpu %d: %w", e, cpu, err)
	}
	oe := &OpenError{Event: e, CPU: cpu, Errno: errno}
	switch {
	case e.Hardware() && (errno == unix.ENOENT || errno == unix.ENODEV) && e != Cycles && HasPMU():
		oe.Reason = ErrEventNotSupported
		oe.Hint = "this machine's PMU does not count " + e.String() + "; the other events still count"
	case e.Hardware() && (errno == unix.ENOENT || errno == unix.ENODEV):
		oe.Reason = ErrNoPMU
		oe.Hint = "this machine exposes no PMU to the kernel (common in VMs); cpu-clock still works"
	case e.Hardware() && (errno == unix.EOPNOTSUPP || errno == unix.EINVAL):
		oe.Reason = ErrPMURefused
		oe.Hint = "the PMU does not support sampling this event here; counting with perf stat may still work"
	case errno == unix.EBUSY:
		oe.Reason = ErrCountersBusy
		oe.Hint = "another tool holds the counters exclusively; stop it and restart bpfperfd"
	case errno == unix.EACCES || errno == unix.EPERM:
		oe.Reason = ErrNotPermitted
		oe.Hint = permissionHint()
	}
	return oe
}

func (e *OpenError) Error() string {
	var b strings.Builder
	if e.CPU < 0 {
		fmt.Fprintf(&b, "open %v event on this thread: ", e.Event)
	} else {
		fmt.Fprintf(&b, "open %v event on cpu %d: ", e.Event, e.CPU)
	}
	if e.Reason != nil {
		fmt.Fprintf(&b, "%v (%s)", e.Reason, unix.ErrnoName(e.Errno))
	} else {
		b.WriteString(e.Errno.Error())
	}
	if e.Hint != "" {
		b.WriteString(": " + e.Hint)
	}
	return b.String()
}

// Summary is the reason and the errno without the event and CPU, as a
// status line shows it: "no hardware PMU (ENOENT)".
func (e *OpenError) Summary() string {
	if e.Reason == nil {
		return e.Errno.Error() + " (" + unix.ErrnoName(e.Errno) + ")"
	}
	return fmt.Sprintf("%v (%s)", e.Reason, unix.ErrnoName(e.Errno))
}

func (e *OpenError) Unwrap() []error {
	if e.Reason == nil {
		return []error{e.Errno}
	}
	return []error{e.Reason, e.Errno}
}

// HasPMU reports whether a hardware PMU counts here: whether a cycles
// counter opens on the calling thread (user mode only, so it needs no
// privilege beyond perf_event_paranoid's default). Probed once; a
// variable so that tests can say either.
var HasPMU = sync.OnceValue(func() bool {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_HARDWARE,
		Config: unix.PERF_COUNT_HW_CPU_CYCLES,
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// permissionHint names what usually refuses perf events: the missing
// capability, and the paranoid level when it is the one that bites.
func permissionHint() string {
	hint := "bpfperfd needs CAP_PERFMON (or CAP_SYS_ADMIN) for system-wide perf events; in a container, grant CAP_PERFMON"
	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
		hint += "; kernel.perf_event_paranoid is " + strings.TrimSpace(string(b))
	}
	return hint
}

// notSupported is a sentinel that also matches ebpf.ErrNotSupported, so
// callers can tell "the machine can't" from "something broke" as they do
// for the kernel's other refusals.
type notSupported string

func (e notSupported) Error() string { return string(e) }

func (e notSupported) Is(target error) bool { return target == ebpf.ErrNotSupported }
