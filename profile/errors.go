package profile

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrBusy means a capture is already running on the sampler.
	ErrBusy = errors.New("a capture is already running")
	// ErrBadDuration means a capture duration outside [MinDuration, the
	// sampler's MaxDuration]. The error is a *DurationError.
	ErrBadDuration = errors.New("bad capture duration")
	// ErrBadRate means a sampling frequency outside [1, MaxHz].
	ErrBadRate = errors.New("bad sampling frequency")
	// ErrClosed means the sampler was closed.
	ErrClosed = errors.New("sampler closed")
	// ErrNotProfile means the input is not a pprof profile.
	ErrNotProfile = errors.New("not a pprof profile")
	// ErrNoProfiles means there was nothing to merge.
	ErrNoProfiles = errors.New("no profiles")
	// ErrNoCPUValue means the profile has no cpu/nanoseconds sample type,
	// so CPU shares cannot be computed from it.
	ErrNoCPUValue = errors.New("profile has no cpu/nanoseconds values")
	// ErrNoEventValue means the profile has neither an event value per
	// sample nor a fixed period, so event totals cannot be estimated.
	ErrNoEventValue = errors.New("profile has no event values")
	// ErrAddressesHidden means /proc/kallsyms lists every address as 0:
	// the kernel hides its addresses from this process (kptr_restrict, or
	// perf_event_paranoid above 1, without CAP_SYSLOG), and so does it
	// the JIT addresses of BPF programs. Kernel and BPF frames go unnamed.
	ErrAddressesHidden = errors.New("kernel addresses are hidden from bpfperfd: kernel and BPF frames go unnamed (it needs CAP_SYSLOG where kernel.kptr_restrict or perf_event_paranoid > 1 hide them)")
)

// DurationError is a capture duration outside the allowed range. It matches
// ErrBadDuration.
type DurationError struct {
	Duration, Min, Max time.Duration
}

func (e *DurationError) Error() string {
	return fmt.Sprintf("%s: %v is not within %v..%v", ErrBadDuration, e.Duration, e.Min, e.Max)
}

// Is makes errors.Is(err, ErrBadDuration) true.
func (e *DurationError) Is(target error) bool { return target == ErrBadDuration }
