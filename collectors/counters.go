package collectors

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// openCounter opens e in counting mode on one CPU, for all tasks. A
// failure is a *perfevent.OpenError saying why in words.
func openCounter(e perfevent.Event, cpu int) (*perf.Event, error) {
	a, err := e.CountingAttr()
	if err != nil {
		return nil, err
	}
	return perfevent.Open(e, a, cpu)
}

// openPerCPU opens e counting on each of ncpu CPUs, for all tasks; an
// offline CPU's entry is nil (nothing runs there). It fails as
// openCounter does, and then holds nothing.
func openPerCPU(e perfevent.Event, ncpu int) ([]*perf.Event, error) {
	evs := make([]*perf.Event, ncpu)
	for cpu := range ncpu {
		ev, err := openCounter(e, cpu)
		switch {
		case errors.Is(err, unix.ENODEV) && cpu > 0:
		case err != nil:
			for _, ev := range evs {
				if ev != nil {
					ev.Close()
				}
			}
			return nil, err
		default:
			evs[cpu] = ev
		}
	}
	return evs, nil
}

// putPerfEvents hands each open perf event to a BPF perf event array at
// its index in evs; nil entries (offline CPUs) are left out.
func putPerfEvents(m *ebpf.Map, evs []*perf.Event) error {
	for i, ev := range evs {
		if ev == nil {
			continue
		}
		fd, err := ev.FD()
		if err == nil {
			err = m.Put(uint32(i), uint32(fd))
		}
		if err != nil {
			return fmt.Errorf("perf event %d: %w", i, err)
		}
	}
	return nil
}

var (
	// ErrTracingRefused: the kernel does not load fentry/fexit programs
	// against a BPF program, so exact counting is off.
	ErrTracingRefused = fmt.Errorf("kernel refuses tracing programs (fentry/fexit): %w", ebpf.ErrNotSupported)
	// ErrNoBTF: the target program was loaded without BTF, which fentry
	// needs to attach to it.
	ErrNoBTF = fmt.Errorf("target program has no BTF: %w", ebpf.ErrNotSupported)
	// ErrTooManyTargets: the limit on targets counted at once is reached.
	ErrTooManyTargets = errors.New("too many counter targets")
)

// CounterError says why a counter mechanism, event or target is not
// available. It matches its Reason (one of perfevent.ErrNoPMU, ErrTracingRefused,
// ErrNoBTF, ErrTooManyTargets, ErrNotPermitted) and the underlying error
// (often an errno) with errors.Is.
type CounterError struct {
	Op     string // what was tried
	Reason error  // sentinel
	Err    error  // cause, may be nil
}

func (e *CounterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s: %v", e.Op, e.Reason)
	}
	return fmt.Sprintf("%s: %v: %v", e.Op, e.Reason, e.Err)
}

func (e *CounterError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// CounterSupport is what ProbeCounters found. A nil error means available.
type CounterSupport struct {
	// Events lists the events that open on this machine: cpu-clock, plus
	// cycles, instructions and LLC misses where a PMU exists.
	Events []perfevent.Event
	// PMU is nil when hardware events open; otherwise it matches perfevent.ErrNoPMU
	// and carries the errno.
	PMU error
	// EventErrors says why each event that did not open did not: with a
	// PMU, perfevent.ErrEventNotSupported for one it does not count.
	EventErrors map[perfevent.Event]error
	// Exact is nil when the kernel loads fentry/fexit programs against a
	// BPF program (the exact mechanism); otherwise it matches
	// ErrTracingRefused and carries the errno.
	Exact error
}

// DefaultEvents returns the events worth counting here: the hardware ones
// where a PMU exists, cpu-clock where none does.
func (s CounterSupport) DefaultEvents() []perfevent.Event {
	var hw []perfevent.Event
	for _, e := range s.Events {
		if e.Hardware() {
			hw = append(hw, e)
		}
	}
	if len(hw) > 0 {
		return hw
	}
	return []perfevent.Event{perfevent.CPUClock}
}

// ProbeCounters finds out which events open and whether the exact mechanism
// works, by opening each event on CPU 0 and by loading (not attaching) an
// fentry program against a throw-away target. It holds nothing afterwards.
// Needs CAP_PERFMON and CAP_BPF (or root); the exact mechanism needs
// Linux 5.5 and a kernel that allows tracing programs.
func ProbeCounters() CounterSupport {
	var s CounterSupport
	for _, e := range perfevent.All {
		ev, err := openCounter(e, 0)
		if err != nil {
			if e == perfevent.Cycles {
				s.PMU = err
			}
			if s.EventErrors == nil {
				s.EventErrors = make(map[perfevent.Event]error)
			}
			s.EventErrors[e] = err
			continue
		}
		ev.Close()
		s.Events = append(s.Events, e)
	}
	s.Exact = ProbeExact()
	return s
}

// ProbeExact loads the exact counters' fentry program on a target of its
// own and unloads both: nil where exact counting can run.
func ProbeExact() error {
	target, err := btfprog.Load("bpfperf_probe", asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()})
	if err != nil {
		return fmt.Errorf("load probe target: %w", err)
	}
	defer target.Close()
	spec, err := loadCounters()
	if err != nil {
		return err
	}
	ps := spec.Programs["counters_entry"]
	ps.AttachTarget, ps.AttachTo = target, "bpfperf_probe"
	coll, err := ebpf.NewCollection(&ebpf.CollectionSpec{
		Maps:     spec.Maps,
		Programs: map[string]*ebpf.ProgramSpec{"counters_entry": ps},
	})
	if err != nil {
		return tracingError("load fentry program", err)
	}
	coll.Close()
	return nil
}

// tracingError classifies a failure to load or attach a tracing program.
// EPERM from a kernel that loads other BPF programs means it refuses
// tracing programs (our hosts); EOPNOTSUPP and ENOTSUPP (524) mean it
// cannot trace this target. A verifier rejection is a bug of ours, not a
// refusal, whatever its errno.
func tracingError(op string, err error) error {
	var verr *ebpf.VerifierError
	var errno unix.Errno
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("%s: %w", op, err)
	case errors.As(err, &errno) && (errno == unix.EPERM || errno == unix.EOPNOTSUPP || errno == 524):
		return &CounterError{Op: op, Reason: ErrTracingRefused, Err: errno}
	case errors.Is(err, ebpf.ErrNotSupported):
		return &CounterError{Op: op, Reason: ErrTracingRefused, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}
