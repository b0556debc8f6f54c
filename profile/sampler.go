package profile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event is what the sampler counts to decide when to take a sample.
type Event int

const (
	// CPUClock is the software cpu-clock event: a sample every 1/Hz
	// seconds of CPU time. Every kernel has it.
	CPUClock Event = iota
	// Cycles is the hardware cycles event, sampled Hz times per second on
	// average. It needs a PMU; without one NewSampler fails with ErrNoPMU.
	Cycles
	// Instructions is the hardware instructions-retired event, sampled like
	// Cycles. It needs a PMU.
	Instructions
	// LLCMisses is the hardware cache-misses event, which perf calls
	// cache-misses (last-level cache misses on most CPUs), sampled like
	// Cycles. It needs a PMU.
	LLCMisses
)

func (e Event) String() string {
	switch e {
	case CPUClock:
		return "cpu-clock"
	case Cycles:
		return "cycles"
	case Instructions:
		return "instructions"
	case LLCMisses:
		return "llc-misses"
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

const (
	// DefaultHz is the sampling frequency when SamplerConfig.Hz is 0: 99
	// rather than 100 so samples do not lock step with periodic timers.
	DefaultHz = 99
	// MaxHz is the highest sampling frequency a Sampler accepts.
	MaxHz = 1000
	// MinDuration is the shortest capture.
	MinDuration = 100 * time.Millisecond
	// DefaultMaxDuration is the longest capture when
	// SamplerConfig.MaxDuration is 0.
	DefaultMaxDuration = 10 * time.Minute

	defaultRingPages = 32
)

// SamplerConfig says what to sample and how.
type SamplerConfig struct {
	Event Event
	// Hz is the number of samples per second and CPU; 0 means DefaultHz.
	Hz int
	// MaxDuration caps Capture's duration; 0 means DefaultMaxDuration.
	MaxDuration time.Duration
	// CPUs to sample; nil means every online CPU.
	CPUs []int
	// SysRoot and ProcRoot default to /sys and /proc.
	SysRoot, ProcRoot string
	// RingPages is the size of each CPU's ring buffer in pages, a power of
	// two; 0 means 32 (128 KiB), room for several seconds at MaxHz.
	RingPages int
	// Symbolizer, if set, learns the BPF programs that samples land in
	// while the capture runs (see Symbolizer.Observe), so that programs
	// loaded and unloaded between two of the daemon's sweeps still resolve.
	Symbolizer *Symbolizer
}

// Sampler samples kernel call stacks on every CPU with one perf event per
// CPU. The events stay open, disabled, between captures; the sampler holds
// no BPF program. A Sampler runs one capture at a time. It needs
// CAP_PERFMON (or CAP_SYS_ADMIN) for system-wide kernel samples.
type Sampler struct {
	cfg    SamplerConfig
	period uint64 // ns between samples for CPUClock; 0 in frequency mode
	rings  []*ring
	busy   atomic.Bool

	mu     sync.Mutex // guards closed against Close during Capture
	closed bool
}

// Sample is one sample: where a CPU was and which task ran on it.
type Sample struct {
	Time   uint64 // CLOCK_BOOTTIME in ns, the clock of ProgramInfo's load time
	CPU    uint32
	PID    uint32 // thread group id; 0 for the idle task
	TID    uint32
	Comm   string // the thread's name, read while the capture ran
	Period uint64 // event units this sample stands for (ns for CPUClock)
	// Stack is the kernel call chain, innermost first. It is empty when the
	// CPU ran user code. Identical stacks share one slice.
	Stack []uint64
}

// Capture is what one capture window collected.
type Capture struct {
	Event    Event
	Hz       int
	Period   uint64 // ns per sample for CPUClock; 0 when the kernel varies it
	CPUs     int
	Start    time.Time
	Duration time.Duration
	Samples  []Sample
	Lost     uint64 // samples the kernel dropped because a ring was full
}

// NewSampler opens one disabled sampling event per CPU and maps its ring
// buffer. Close releases them.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	if cfg.Hz == 0 {
		cfg.Hz = DefaultHz
	}
	if cfg.Hz < 1 || cfg.Hz > MaxHz {
		return nil, fmt.Errorf("%w: %d Hz is not within 1..%d", ErrBadRate, cfg.Hz, MaxHz)
	}
	if cfg.MaxDuration == 0 {
		cfg.MaxDuration = DefaultMaxDuration
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.RingPages == 0 {
		cfg.RingPages = defaultRingPages
	}
	if cfg.RingPages < 1 || cfg.RingPages&(cfg.RingPages-1) != 0 {
		return nil, fmt.Errorf("ring pages %d: not a power of two", cfg.RingPages)
	}
	if cfg.CPUs == nil {
		cpus, err := onlineCPUs(cfg.SysRoot)
		if err != nil {
			return nil, err
		}
		cfg.CPUs = cpus
	}
	attr, period, err := eventAttr(cfg.Event, cfg.Hz)
	if err != nil {
		return nil, err
	}
	s := &Sampler{cfg: cfg, period: period}
	for _, cpu := range cfg.CPUs {
		r, err := openRing(attr, cpu, cfg.RingPages)
		if err != nil {
			s.closeRings()
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
				if cfg.Event != CPUClock {
					return nil, &PMUError{Event: cfg.Event, Err: err}
				}
			}
			return nil, fmt.Errorf("open %s event on cpu %d: %w", cfg.Event, cpu, err)
		}
		s.rings = append(s.rings, r)
	}
	return s, nil
}

func eventAttr(ev Event, hz int) (*unix.PerfEventAttr, uint64, error) {
	attr := &unix.PerfEventAttr{
		Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample_type: unix.PERF_SAMPLE_IP | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME |
			unix.PERF_SAMPLE_CPU | unix.PERF_SAMPLE_PERIOD | unix.PERF_SAMPLE_CALLCHAIN,
		Bits: unix.PerfBitDisabled | unix.PerfBitExcludeHv |
			unix.PerfBitExcludeCallchainUser | unix.PerfBitUseClockID,
		Clockid: unix.CLOCK_BOOTTIME,
	}
	var period uint64
	switch ev {
	case CPUClock:
		// cpu-clock counts nanoseconds; a fixed period keeps every sample
		// worth the same time.
		attr.Type = unix.PERF_TYPE_SOFTWARE
		attr.Config = unix.PERF_COUNT_SW_CPU_CLOCK
		period = uint64(time.Second) / uint64(hz)
		attr.Sample = period
	case Cycles, Instructions, LLCMisses:
		attr.Type = unix.PERF_TYPE_HARDWARE
		attr.Config = map[Event]uint64{
			Cycles:       unix.PERF_COUNT_HW_CPU_CYCLES,
			Instructions: unix.PERF_COUNT_HW_INSTRUCTIONS,
			LLCMisses:    unix.PERF_COUNT_HW_CACHE_MISSES,
		}[ev]
		// The kernel varies the period to keep Hz; each sample records its
		// own (PERF_SAMPLE_PERIOD).
		attr.Bits |= unix.PerfBitFreq
		attr.Sample = uint64(hz)
	default:
		return nil, 0, fmt.Errorf("unknown event %v", ev)
	}
	return attr, period, nil
}

// onlineCPUs parses sys/devices/system/cpu/online ("0-3,6").
func onlineCPUs(sysRoot string) ([]int, error) {
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

// Hz is the sampling frequency per CPU.
func (s *Sampler) Hz() int { return s.cfg.Hz }

// Event is the event the sampler counts.
func (s *Sampler) Event() Event { return s.cfg.Event }

// MaxDuration is the longest capture the sampler accepts.
func (s *Sampler) MaxDuration() time.Duration { return s.cfg.MaxDuration }

// CheckDuration returns a *DurationError unless d is within
// [MinDuration, max].
func CheckDuration(d, max time.Duration) error {
	if d < MinDuration || d > max {
		return &DurationError{Duration: d, Min: MinDuration, Max: max}
	}
	return nil
}

// Capture samples every CPU for d and returns the samples. It fails with
// ErrBadDuration when d is out of range and with ErrBusy while another
// capture runs. When ctx ends first, Capture returns the samples taken so
// far together with ctx's error.
func (s *Sampler) Capture(ctx context.Context, d time.Duration) (*Capture, error) {
	if err := CheckDuration(d, s.cfg.MaxDuration); err != nil {
		return nil, err
	}
	if !s.busy.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("capture: %w", ErrBusy)
	}
	defer s.busy.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("capture: %w", ErrClosed)
	}

	c := &Capture{Event: s.cfg.Event, Hz: s.cfg.Hz, Period: s.period, CPUs: len(s.rings)}
	d2 := newDecoder(s.cfg.ProcRoot)
	for _, r := range s.rings {
		r.skip() // whatever a cancelled capture left behind
	}
	c.Start = time.Now()
	for _, r := range s.rings {
		if err := r.enable(); err != nil {
			s.disable()
			return nil, err
		}
	}
	drain := func() {
		before := len(d2.stacks)
		for _, r := range s.rings {
			c.Samples, c.Lost = r.read(d2, c.Samples, c.Lost)
		}
		if sym := s.cfg.Symbolizer; sym != nil && len(d2.stacks) > before {
			sym.Observe(d2.fresh[before:])
		}
	}

	tick := time.NewTicker(drainInterval(s.cfg.Hz, s.cfg.RingPages))
	defer tick.Stop()
	end := time.NewTimer(d)
	defer end.Stop()
	var err error
loop:
	for {
		select {
		case <-tick.C:
			drain()
		case <-end.C:
			break loop
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		}
	}
	s.disable()
	c.Duration = time.Since(c.Start)
	drain()
	return c, err
}

func (s *Sampler) disable() {
	for _, r := range s.rings {
		r.disable()
	}
}

// drainInterval is how often Capture empties the rings: a quarter of the
// time a ring takes to fill with 1 KiB samples, at most once a second.
func drainInterval(hz, pages int) time.Duration {
	fill := time.Duration(pages*os.Getpagesize()/1024) * time.Second / time.Duration(hz)
	return min(max(fill/4, 10*time.Millisecond), time.Second)
}

// Close disables and closes the perf events; it waits for a running
// capture to end.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeRings()
}

func (s *Sampler) closeRings() error {
	var errs []error
	for _, r := range s.rings {
		errs = append(errs, r.close())
	}
	s.rings = nil
	return errors.Join(errs...)
}
