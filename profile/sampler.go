package profile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/perfring"
	"github.com/bpfperf/bpfperf/profile/kfilter"
)

const (
	// DefaultHz is the sampling frequency when SamplerConfig.Hz is 0: 99
	// rather than 100 so samples do not lock step with periodic timers.
	DefaultHz = 99
	// MaxHz is the highest sampling frequency a Sampler accepts.
	MaxHz = 1000
	// MaxHardwareHz bounds hardware events whatever Hz asks, per event and
	// CPU. Each hardware sample is an NMI, and in a VM a VM exit: at 999 Hz
	// with three hardware events and a busy program our VM logged "perf:
	// interrupt took too long", a soft lockup of the busy CPU, and a cut of
	// perf_event_max_sample_rate; at 99 Hz the cost was not measurable.
	MaxHardwareHz = 100
	// MinDuration is the shortest capture.
	MinDuration = 100 * time.Millisecond
	// DefaultMaxDuration is the longest capture when
	// SamplerConfig.MaxDuration is 0.
	DefaultMaxDuration = 10 * time.Minute

	defaultRingPages = 32
)

// SamplerConfig says what to sample and how.
type SamplerConfig struct {
	Event perfevent.Event
	// Hz is the number of samples per second and CPU; 0 means DefaultHz.
	// Hardware events sample at most MaxHardwareHz.
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
	// noCgroup samples without PERF_SAMPLE_CGROUP, as a kernel before 5.7
	// does: BenchmarkAttributionCost compares the two.
	noCgroup bool
	// Symbolizer, if set, learns the BPF programs loaded when a capture
	// starts and those loaded while it runs, at each drain (LearnNew),
	// and those that samples land in (Observe), so that programs loaded
	// and unloaded between two of the daemon's sweeps still resolve.
	Symbolizer *Symbolizer
	// Filter, if set, loads a filter the sampler puts on its events so
	// that the kernel writes only samples that touch BPF code or a hook
	// (LoadKernelFilter; needs Symbolizer). Where it does not load or
	// attach, or while a program the kernel runs under bpf_prog_active is
	// loaded (traceRunnerTypes), the sampler samples unfiltered and
	// Capture.Filter says why. Leave it nil for BuildOptions.All.
	Filter func() (KernelFilter, error)
	// Own, if set, names the programs the caller loaded itself: its own
	// tracepoint programs do not turn the filter off.
	Own func(id uint32) bool
	// Told says the caller tells Symbolizer of every program within a
	// second of its load (Learn), as the daemon does from its sweep and
	// its load records. Then a filtered capture that has nothing else to
	// look at (no scrape waiting, no tracing program to watch) drains
	// only when a ring passes its watermark and at its end, and sleeps
	// in between, instead of draining every second to look for programs.
	Told bool
}

// Sampler samples kernel call stacks on every CPU with one perf event per
// CPU. The events stay open, disabled, between captures; the sampler holds
// no BPF program. A Sampler runs one capture at a time. It needs
// CAP_PERFMON (or CAP_SYS_ADMIN) for system-wide kernel samples.
type Sampler struct {
	cfg    SamplerConfig
	period uint64 // ns between samples for CPUClock; 0 in frequency mode
	rings  []*ring
	// cgroups is whether samples carry the cgroup id (the kernel took
	// PERF_SAMPLE_CGROUP); cgroupRoot is the cgroup2 mount ("" for none).
	cgroups    bool
	cgroupRoot string
	busy       atomic.Bool
	// hz is the frequency in force: cfg.Hz, bounded for hardware events,
	// halved after a capture the kernel throttled (see backOff).
	hz atomic.Int64

	mu     sync.Mutex // guards closed against Close during Capture
	closed bool
	// tap, if set, sees every capture's samples as they are drained: how
	// the profiler's scrapes share its continuous sampler (scrape.go).
	// Set before the first capture.
	tap sampleTap

	// The kernel filter (filter.go): nil where cfg.Filter is nil or it
	// failed (filterErr says why); filtered is whether the open rings
	// carry it; attr reopens the rings when that must change.
	filter    KernelFilter
	filterErr error
	filtered  bool
	reason    string // why the current capture is not filtered
	// tracingRuns are the run times of the tracing programs (filter.go)
	// at the last capture's start.
	tracingRuns map[uint32]tracingRun
	attr        *unix.PerfEventAttr
	// filterGen is the symbolizer's generation (changes) whose code the
	// filter has.
	filterGen uint64
	// filterProbes: the ranges set include the probe machinery's, for a
	// kprobe-type program learned then (Symbolizer.hasProbes).
	filterProbes bool
}

// Sample is one sample: where a CPU was and which task ran on it.
type Sample struct {
	Time uint64 // CLOCK_BOOTTIME in ns, the clock of ProgramInfo's load time
	CPU  uint32
	PID  uint32 // thread group id; 0 for the idle task
	TID  uint32
	Comm string // the thread's name, read while the capture ran
	// Cgroup is the cgroup v2 id of the task the sample interrupted (its
	// directory's inode number under the cgroup2 mount), 0 where the
	// kernel cannot say (before 5.7).
	Cgroup uint64
	Period uint64 // event units this sample stands for (ns for CPUClock)
	// Stack is the kernel call chain, innermost first. It is empty when the
	// CPU ran user code. Identical stacks share one slice.
	Stack []uint64
}

// Capture is what one capture window collected.
type Capture struct {
	Event    perfevent.Event
	Hz       int    // the frequency in force during the capture
	Period   uint64 // ns per sample for CPUClock; 0 when the kernel varies it
	CPUs     int
	Start    time.Time
	Duration time.Duration
	Samples  []Sample
	Lost     uint64 // samples the kernel dropped because a ring was full
	// Throttled counts the times the kernel stopped the event for a while
	// because its interrupts took too long (PERF_RECORD_THROTTLE).
	Throttled uint64
	// Filter says what the kernel filter did; zero without one.
	Filter FilterStats
	// RunningShare is the part of the capture the event was on the PMU,
	// summed over CPUs (time running / time enabled): below 1 when another
	// tool's events multiplexed with it. Build scales values by its
	// inverse. 0 when the kernel did not say.
	RunningShare float64
	// Drains counts how often the capture emptied its rings before its
	// end, and why.
	Drains Drains
}

// Drains are a capture's drains before its end: on its timer (Timed),
// and because a ring passed its watermark (Full).
type Drains struct{ Timed, Full int }

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
		cpus, err := perfring.OnlineCPUs(cfg.SysRoot)
		if err != nil {
			return nil, err
		}
		cfg.CPUs = cpus
	}
	hz := cfg.Hz
	if cfg.Event.Hardware() {
		hz = min(hz, MaxHardwareHz)
	}
	format := uint64(withCgroup)
	if cfg.noCgroup {
		format = sampleType
	}
	attr, err := cfg.Event.SamplingAttr(hz, format)
	if err != nil {
		return nil, err
	}
	s := &Sampler{cfg: cfg, cgroups: !cfg.noCgroup}
	s.cgroupRoot, _ = cgroupid.Mount(cfg.ProcRoot + "/self/mountinfo") // none: no /proc fallback
	s.hz.Store(int64(hz))
	if attr.Bits&unix.PerfBitFreq == 0 {
		s.period = attr.Sample // cpu-clock: every sample is worth the same ns
	}
	s.attr = attr
	if cfg.Filter != nil && cfg.Symbolizer == nil {
		s.filterErr = errors.New("no symbolizer to say where BPF code is")
	} else if cfg.Filter != nil {
		s.filter, s.filterErr = cfg.Filter()
	}
	if err := s.openRings(s.filter != nil); err != nil {
		if s.filter != nil {
			s.filter.Close()
		}
		return nil, err
	}
	return s, nil
}

// openRings opens a sampling event and ring on every CPU, with the filter
// on each when filtered. A filter an event refuses is given up: the
// rings open without it and filterErr says why.
func (s *Sampler) openRings(filtered bool) error {
	for _, cpu := range s.cfg.CPUs {
		r, err := openRing(s.cfg.Event, s.attr, cpu, s.cfg.RingPages)
		if err != nil && s.cgroups && len(s.rings) == 0 && errors.Is(err, unix.EINVAL) {
			// Before 5.7 the kernel knows no PERF_SAMPLE_CGROUP:
			// sample without it, and samples say no cgroup.
			s.attr.Sample_type = sampleType
			s.cgroups = false
			r, err = openRing(s.cfg.Event, s.attr, cpu, s.cfg.RingPages)
		}
		if err != nil {
			s.closeRings()
			return err
		}
		s.rings = append(s.rings, r)
		if filtered {
			if err := s.filter.Attach(r.FD); err != nil {
				s.closeRings()
				s.dropFilter(err)
				return s.openRings(false)
			}
		}
	}
	s.filtered = filtered
	return nil
}

// dropFilter gives the filter up for good: err says why.
func (s *Sampler) dropFilter(err error) {
	s.filter.Close()
	s.filter, s.filterErr = nil, err
}

// setFiltered reopens the rings with or without the filter, between
// captures: an event keeps its program until it closes.
func (s *Sampler) setFiltered(on bool) error {
	if on == s.filtered {
		return nil
	}
	if err := s.closeRings(); err != nil {
		return err
	}
	return s.openRings(on)
}

// refreshFilter gives the filter every code range the symbolizer knows
// now.
func (s *Sampler) refreshFilter() error {
	sym := s.cfg.Symbolizer
	sym.reloadForTrampolines(time.Now())
	gen, _ := sym.changes() // what is learned from here on is added later
	rs, probes, err := sym.codeRanges()
	if err != nil {
		return err
	}
	if err := s.filter.SetRanges(rs); err != nil {
		return err
	}
	s.filterGen, s.filterProbes = gen, probes
	return nil
}

// updateFilter adds to the filter the code of the programs learned since
// its ranges were last set or added to: a map update per new page, not
// every range again. kallsyms read again for a trampoline, or a log of
// learned functions that no longer reaches back (Prune), sets them all.
func (s *Sampler) updateFilter() error {
	sym := s.cfg.Symbolizer
	if sym.reloadForTrampolines(time.Now()) || sym.hasProbes() != s.filterProbes {
		return s.refreshFilter()
	}
	rs, gen, ok := sym.rangesSince(s.filterGen)
	if !ok {
		return s.refreshFilter()
	}
	if gen == s.filterGen {
		return nil
	}
	if err := s.filter.AddRanges(rs); err != nil {
		return err
	}
	s.filterGen = gen
	return nil
}

// mustPoll says whether a capture must drain on its timer, not only
// when a ring fills: unfiltered (every sample passes, the rings fill at
// the sampling rate), while the caller does not tell the symbolizer of
// new programs (a drain looks for them), while a tracing program is
// loaded (the filter is turned off when one turns busy, which only a
// look at its run time tells), and while a scrape waits for samples.
func (s *Sampler) mustPoll() bool {
	return !s.filtered || !s.cfg.Told ||
		len(s.cfg.Symbolizer.tracing(s.cfg.Own)) > 0 ||
		(s.tap != nil && s.tap.pending())
}

// perfRings are the rings as internal/perfring has them.
func (s *Sampler) perfRings() []*perfring.Ring {
	rs := make([]*perfring.Ring, len(s.rings))
	for i, r := range s.rings {
		rs[i] = r.Ring
	}
	return rs
}

// tracingBusy says whether a tracing program (filter.go) ran over
// MaxTracingShare of a CPU since the last look, and which.
func (s *Sampler) tracingBusy() (string, bool) {
	ids := s.cfg.Symbolizer.tracing(s.cfg.Own)
	if s.tracingRuns == nil {
		s.tracingRuns = map[uint32]tracingRun{}
	}
	if id, share, busy := busyTracing(ids, s.tracingRuns, time.Now()); busy {
		return fmt.Sprintf("program %d (kprobe, tracepoint or perf_event) ran %.2f%% of a CPU: the kernel drops filtered samples while it runs", id, 100*share), true
	}
	return "", false
}

// filterMode decides whether the next capture is filtered, and why not.
func (s *Sampler) filterMode() (bool, string) {
	switch {
	case s.filter == nil && s.filterErr == nil:
		return false, "off"
	case s.filter == nil:
		return false, s.filterErr.Error()
	}
	if reason, busy := s.tracingBusy(); busy {
		return false, reason
	}
	return true, ""
}

// Hz is the sampling frequency per CPU in force: the configured one,
// bounded for hardware events and lowered after throttling.
func (s *Sampler) Hz() int { return int(s.hz.Load()) }

// Event is the event the sampler counts.
func (s *Sampler) Event() perfevent.Event { return s.cfg.Event }

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
	return s.captureBounded(ctx, d, nil)
}

// captureBounded is Capture calling onEnabled as capture does.
func (s *Sampler) captureBounded(ctx context.Context, d time.Duration, onEnabled func()) (*Capture, error) {
	if err := CheckDuration(d, s.cfg.MaxDuration); err != nil {
		return nil, err
	}
	return s.capture(ctx, d, onEnabled)
}

// capture is Capture without the bounds on d: the profiler samples the
// gap between two continuous windows, however short, for its scrapes.
// onEnabled, if set, is called once every CPU's event is on: a Recorder's
// span starts sampling before the work it profiles.
func (s *Sampler) capture(ctx context.Context, d time.Duration, onEnabled func()) (*Capture, error) {
	if !s.busy.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("capture: %w", ErrBusy)
	}
	defer s.busy.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("capture: %w", ErrClosed)
	}

	// learned is closed at the next program the symbolizer learns.
	var learned <-chan struct{}
	if s.filter != nil {
		on, reason := s.filterMode()
		if on {
			_, learned = s.cfg.Symbolizer.changes()
			if err := s.refreshFilter(); err != nil {
				on, reason = false, fmt.Sprintf("code ranges: %v", err)
			}
		}
		if err := s.setFiltered(on); err != nil {
			return nil, err
		}
		if on && !s.filtered {
			reason = s.filterErr.Error() // an event refused it
		}
		s.reason = reason
	} else {
		s.reason = "off"
		if s.filterErr != nil {
			s.reason = s.filterErr.Error()
		}
	}

	c := &Capture{Event: s.cfg.Event, Hz: s.Hz(), Period: s.period, CPUs: len(s.rings)}
	c.Filter.On, c.Filter.Reason = s.filtered, s.reason
	d2 := newDecoder(s.cfg.ProcRoot)
	d2.cgroups, d2.cgroupRoot = s.cgroups, s.cgroupRoot
	// Read at each capture: a v1 hierarchy can be mounted at any time.
	d2.perfEventV1 = cgroupid.PerfEventOnV1(s.cfg.ProcRoot + "/self/cgroup")
	d2.toBoot = bootOffset()
	var before []times
	for _, r := range s.rings {
		r.Skip() // whatever a cancelled capture left behind
		before = append(before, r.times())
	}
	var counts0 kfilter.Counts
	if s.filtered {
		counts0, _ = s.filter.Counts()
	}
	sym := s.cfg.Symbolizer
	if sym != nil {
		// Before sampling starts: a program that unloads during the
		// capture, however late its samples are drained, resolves.
		sym.LearnNew()
	}
	// full says a ring passed its watermark (half the ring). Where it
	// cannot watch, the timer alone drains, as it always may. Watched
	// before the rings are enabled, so no record comes before the watch.
	var full <-chan struct{}
	watch, werr := perfring.Watch(s.perfRings())
	if werr == nil {
		full = watch.Ready()
		defer func() {
			if watch != nil {
				watch.Close()
			}
		}()
	}
	c.Start = time.Now()
	for _, r := range s.rings {
		if err := r.enable(); err != nil {
			s.disable()
			return nil, err
		}
	}
	if s.filtered {
		_, learned = sym.changes()
		if err := s.updateFilter(); err != nil {
			return nil, err
		}
	}
	if onEnabled != nil {
		onEnabled()
	}
	// drain reads the rings and says how full the fullest was.
	drain := func() (fill float64) {
		before, samples, lost := len(d2.stacks), len(c.Samples), c.Lost
		if sym != nil {
			sym.LearnNew() // programs loaded since the last drain
		}
		if s.filtered {
			_, learned = sym.changes()
			s.updateFilter()
		}
		for _, r := range s.rings {
			fill = max(fill, float64(r.Pending())/float64(r.Size()))
			r.read(d2, c)
		}
		if sym != nil && len(d2.stacks) > before {
			sym.Observe(d2.fresh[before:])
		}
		if s.tap != nil {
			s.tap.drained(c, c.Samples[samples:], c.Lost-lost)
		}
		return fill
	}

	// Unfiltered, the rings fill at the sampling rate and are drained
	// often. Filtered, few samples pass and the rings are drained seldom,
	// unless the last drain found them filling (a busy program).
	fast := drainInterval(s.cfg.Hz, s.cfg.RingPages)
	slow := fast
	if s.filtered {
		slow = filteredDrainInterval(s.cfg.Hz, s.cfg.RingPages)
	}
	// closeRings adds the rings' times and the filter's counts to the
	// capture's, once the rings are disabled and drained.
	var enabled, running uint64
	closeRings := func() {
		for i, r := range s.rings {
			t := r.times()
			enabled += t.enabled - before[i].enabled
			running += t.running - before[i].running
		}
		if !s.filtered {
			return
		}
		if counts, err := s.filter.Counts(); err == nil {
			c.Filter.Passed += counts.Passed - counts0.Passed
			c.Filter.Dropped += counts.Dropped - counts0.Dropped
		}
		if f, ok := s.filter.(interface{ Pages() (int, bool) }); ok {
			c.Filter.Pages, _ = f.Pages()
		}
	}
	// unfilter goes on with the capture on rings without the filter.
	unfilter := func(reason string) error {
		s.disable()
		drain()
		if watch != nil {
			// The rings it watches are closed; unfiltered windows drain
			// on the timer.
			watch.Close()
			watch, full = nil, nil
		}
		closeRings()
		if err := s.setFiltered(false); err != nil {
			return err
		}
		c.Filter.On, c.Filter.Reason, s.reason = false, reason, reason
		learned = nil
		before = before[:0]
		for _, r := range s.rings {
			before = append(before, r.times())
		}
		for _, r := range s.rings {
			if err := r.enable(); err != nil {
				s.disable()
				return err
			}
		}
		return nil
	}

	var tapWake <-chan struct{}
	if s.tap != nil {
		tapWake = s.tap.wakeCapture()
	}
	tick := time.NewTimer(slow)
	defer tick.Stop()
	timed := full == nil || s.mustPoll() // tick is armed
	if !timed {
		tick.Stop()
	}
	end := time.NewTimer(d)
	defer end.Stop()
	var err error
loop:
	for {
		var tickC <-chan time.Time
		if timed {
			tickC = tick.C
		}
		next := slow
		select {
		case <-tickC:
			c.Drains.Timed++
			if drain() > filteredFill {
				next = fast
			}
			if s.filtered {
				if reason, busy := s.tracingBusy(); busy {
					// The rest of the window unfiltered: what the
					// tracing program ran since the last drain is lost.
					if err := unfilter(reason); err != nil {
						return nil, err
					}
					next = fast
				}
			}
			timed = false
		case <-full:
			c.Drains.Full++
			if drain() > filteredFill {
				next = fast
			}
		case <-learned:
			// A program learned (the daemon's load records, or a
			// drain's LearnNew): its code passes from now on.
			_, learned = sym.changes()
			s.updateFilter()
		case <-tapWake:
			// A scrape began: it waits for drains.
		case <-end.C:
			break loop
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		}
		if !timed && (full == nil || s.mustPoll()) {
			tick.Reset(next)
			timed = true
		}
	}
	s.disable()
	c.Duration = time.Since(c.Start)
	drain()
	closeRings()
	if enabled > 0 {
		c.RunningShare = float64(running) / float64(enabled)
	}
	if s.tap != nil {
		s.tap.ended(c)
	}
	if c.Throttled > 0 {
		s.backOff()
	}
	return c, err
}

// backOff halves the frequency after a capture the kernel throttled: its
// interrupts took too long, and the daemon must not be what slows the
// host. The next captures sample at the lower rate (Hz says which).
func (s *Sampler) backOff() {
	hz := s.Hz() / 2
	if s.period != 0 || hz < 1 {
		return // cpu-clock has a fixed period, not a frequency
	}
	for _, r := range s.rings {
		if err := r.setFrequency(hz); err != nil {
			return
		}
	}
	s.attr.Sample = uint64(hz) // rings reopened (setFiltered) keep it
	s.hz.Store(int64(hz))
}

// bootOffset is CLOCK_BOOTTIME minus CLOCK_MONOTONIC now: what maps a
// sample's time (perfevent.SampleClock) onto the clock of programs' load
// times. The two differ by the time the machine was suspended, which does
// not change during a capture.
func bootOffset() uint64 {
	var mono, boot unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil || unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil {
		return 0
	}
	return uint64(max(boot.Nano()-mono.Nano(), 0))
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

// filteredFill is how full a filtered capture's fullest ring may be found
// before draining goes back to the unfiltered pace.
const filteredFill = 1.0 / 8

// filteredDrainInterval is how often a filtered capture empties rings
// that stay nearly empty: the time a ring takes to fill with 1 KiB
// samples (every sample passing) less a quarter, at most a second. At
// 99 Hz, 0.97 s: a program that turns busy loses nothing before the
// next drain goes back to the fast pace.
func filteredDrainInterval(hz, pages int) time.Duration {
	fill := time.Duration(pages*os.Getpagesize()/1024) * time.Second / time.Duration(hz)
	return min(max(fill*3/4, 10*time.Millisecond), time.Second)
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
	err := s.closeRings()
	if s.filter != nil {
		err = errors.Join(err, s.filter.Close())
		s.filter = nil
	}
	return err
}

func (s *Sampler) closeRings() error {
	var errs []error
	for _, r := range s.rings {
		errs = append(errs, r.Close())
	}
	s.rings = nil
	return errors.Join(errs...)
}
