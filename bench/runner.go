package bench

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// Config says how to run a suite. The zero value is not valid: start from
// DefaultConfig.
type Config struct {
	// Repeat is the number of runs per measurement; 0 picks one per test so
	// that a measurement takes about Target.
	Repeat int
	// Target is the wall time one measurement aims for when Repeat is 0.
	Target time.Duration
	// Measures is the number of measurements per test.
	Measures int
	// Warmup runs one discarded measurement before the real ones.
	Warmup bool
	// CPUs pins the runner: none means no pinning, one pins to that CPU,
	// several run every test on all of them at the same time (per-CPU
	// parallel mode).
	CPUs []int
	// Filter keeps the tests whose name matches; nil keeps all.
	Filter *regexp.Regexp
	// Quick trims the built-in suite for CI (see Suite).
	Quick bool
	// Events are counted around every measurement's test-run call on its
	// thread, in kernel mode, and reported per run (Result.Events): the
	// hardware events where a PMU exists (bpfperf bench --counters).
	Events []perfevent.Event
	// Unsupported are events asked for that this machine's PMU does not
	// count (ProbeEvents), with why: the report names them, and no figure
	// of theirs is made up.
	Unsupported map[perfevent.Event]error
}

// DefaultConfig is what `bpfperf bench` runs without flags.
func DefaultConfig() Config {
	return Config{Target: 4 * time.Millisecond, Measures: 10, Warmup: true}
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Measures < 1:
		return fmt.Errorf("%w: measures must be at least 1, got %d", ErrBadConfig, c.Measures)
	case c.Repeat < 0:
		return fmt.Errorf("%w: repeat must be at least 1, got %d", ErrBadConfig, c.Repeat)
	case c.Repeat == 0 && c.Target <= 0:
		return fmt.Errorf("%w: need a repeat count or a target time", ErrBadConfig)
	case c.Repeat > 1<<31:
		return fmt.Errorf("%w: repeat %d is too large", ErrBadConfig, c.Repeat)
	}
	for _, cpu := range c.CPUs {
		if cpu < 0 || cpu >= runtime.NumCPU() {
			return fmt.Errorf("%w: cpu %d does not exist (have %d)", ErrBadConfig, cpu, runtime.NumCPU())
		}
	}
	return nil
}

// Case is one prepared test: a loaded program, its input and what it must
// return. The suite builds it; the runner only runs it.
type Case struct {
	Program *ebpf.Program
	Input   Input
	// Want, when set, is the return value every measurement's last run must
	// give; anything else means the test measured the wrong path.
	Want *uint32
	// MaxRepeat caps runs per measurement (e.g. what a ring buffer holds).
	MaxRepeat int
	// Before runs before every measurement, outside the timing (e.g. drain
	// a ring buffer).
	Before func() error

	close func() // releases what the case alone holds
}

func want(v uint32) *uint32 { return &v }

// ProbeEvents says which of events can be counted on a thread here (see
// Config.Events): counted are those that open, together; unsupported
// those this machine's PMU does not count (perfevent.ErrEventNotSupported:
// QEMU's arm64 PMU has no cache events), each with its *perfevent.OpenError.
// err says why none can be counted, or why the others cannot (a
// *perfevent.OpenError: no PMU, not permitted, ...).
func ProbeEvents(events []perfevent.Event) (counted []perfevent.Event, unsupported map[perfevent.Event]error, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var first error
	for _, e := range events {
		c, err := perfevent.OpenThreadCounters([]perfevent.Event{e})
		switch {
		case errors.Is(err, perfevent.ErrEventNotSupported):
			if unsupported == nil {
				unsupported = make(map[perfevent.Event]error)
			}
			unsupported[e] = err
			first = cmp.Or(first, err)
		case err != nil:
			return nil, nil, err
		default:
			c.Close()
			counted = append(counted, e)
		}
	}
	if len(counted) == 0 {
		return nil, unsupported, first
	}
	c, err := perfevent.OpenThreadCounters(counted)
	if err != nil {
		return nil, nil, err
	}
	return counted, unsupported, c.Close()
}

// measureSeries takes n measurements of c on the calling thread, counting
// events around each when there are any: run.Events gets each event's
// count per run, one value per measurement. warmed is called between the
// warm-up and the first measurement.
func measureSeries(c *Case, repeat, n int, warmup bool, events []perfevent.Event, warmed func()) (run CPURun, err error) {
	var ctrs *perfevent.ThreadCounters
	if len(events) > 0 {
		if ctrs, err = perfevent.OpenThreadCounters(events); err != nil {
			return run, err
		}
		defer ctrs.Close()
		run.Events = map[string][]float64{}
	}
	if warmup {
		if _, _, err := measureOnce(c, repeat, ctrs); err != nil {
			return run, err
		}
	}
	warmed()
	for len(run.Measurements) < n {
		ns, counts, err := measureOnce(c, repeat, ctrs)
		if err != nil {
			return run, err
		}
		run.Measurements = append(run.Measurements, ns)
		for i, e := range events {
			run.Events[e.String()] = append(run.Events[e.String()], counts[i]/float64(repeat))
		}
	}
	return run, nil
}

// measureOnce is one BPF_PROG_TEST_RUN call: the kernel's mean over repeat
// runs, and with ctrs the events counted around the call (the syscall's
// entry and exit are in them, a share that falls as 1/repeat). An
// interrupted call is retried from scratch.
func measureOnce(c *Case, repeat int, ctrs *perfevent.ThreadCounters) (float64, []float64, error) {
	for tries := 0; ; tries++ {
		if c.Before != nil {
			if err := c.Before(); err != nil {
				return 0, nil, err
			}
		}
		if ctrs != nil {
			if err := ctrs.Start(); err != nil {
				return 0, nil, err
			}
		}
		ret, ns, err := testRun(c.Program, c.Input, uint32(repeat))
		var counts []float64
		if ctrs != nil {
			var cerr error
			if counts, _, cerr = ctrs.Stop(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if errors.Is(err, errInterrupted) && tries < 100 {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		if c.Want != nil && ret != *c.Want {
			return 0, nil, fmt.Errorf("%w: returned %d, want %d", ErrWrongResult, ret, *c.Want)
		}
		return float64(ns), counts, nil
	}
}

// calibrate picks runs per measurement so that one takes about target.
func calibrate(c *Case, target time.Duration, limit int) (int, error) {
	n := 1000
	if limit > 0 && n > limit {
		n = limit
	}
	start := time.Now()
	ns, _, err := measureOnce(c, n, nil)
	if err != nil {
		return 0, err
	}
	per := ns
	if per < 1 {
		// The kernel rounds down; fall back to wall time, which includes
		// the syscall but only errs toward fewer runs.
		per = float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	repeat := int(float64(target.Nanoseconds()) / per)
	repeat = min(max(repeat, 100), 5_000_000)
	if limit > 0 && repeat > limit {
		repeat = limit
	}
	return repeat, nil
}

// pinned runs f on a locked OS thread bound to cpu (cpu < 0: unpinned).
func pinned(cpu int, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cpu >= 0 {
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return fmt.Errorf("get cpu affinity: %w", err)
		}
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pin to cpu %d: %w", cpu, err)
		}
		defer unix.SchedSetaffinity(0, &old)
	}
	return f()
}

// measure runs c as cfg says: on one (maybe pinned) thread, or on every CPU
// of cfg.CPUs at once. span, if set, is called just before the
// measurements with the measuring threads' ids, and what it returns just
// after them (Options.Measuring).
func measure(c *Case, cfg Config, span func(threads []uint32) (done func(error))) (repeat int, runs []CPURun, err error) {
	cpus := cfg.CPUs
	if len(cpus) == 0 {
		cpus = []int{-1}
	}
	repeat = cfg.Repeat
	if repeat == 0 {
		err = pinned(cpus[0], func() (err error) {
			repeat, err = calibrate(c, cfg.Target, c.MaxRepeat)
			return err
		})
		if err != nil {
			return 0, nil, err
		}
	} else if c.MaxRepeat > 0 && repeat > c.MaxRepeat {
		repeat = c.MaxRepeat
	}
	if c.MaxRepeat > 0 && len(cpus) > 1 {
		// Parallel runs share whatever bounds MaxRepeat.
		repeat = max(repeat/len(cpus), 1)
	}

	// Each CPU's series waits after its warm-up until every one is warm:
	// the measurements of a parallel run start together, and a span
	// around them holds them all and no warm-up.
	var warm sync.WaitGroup
	warm.Add(len(cpus))
	threads := make([]uint32, len(cpus)) // of the series that got through the warm-up
	start := make(chan struct{})
	runs = make([]CPURun, len(cpus))
	errs := make([]error, len(cpus))
	var wg sync.WaitGroup
	for i, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			warmed := sync.OnceFunc(warm.Done)
			defer warmed() // a series that failed before holds nobody up
			errs[i] = pinned(cpu, func() error {
				run, err := measureSeries(c, repeat, cfg.Measures, cfg.Warmup, cfg.Events, func() {
					threads[i] = uint32(unix.Gettid())
					warmed()
					<-start
				})
				run.CPU, run.Summary = cpu, Summarize(run.Measurements)
				runs[i] = run
				return err
			})
		}()
	}
	warm.Wait()
	threads = slices.DeleteFunc(threads, func(tid uint32) bool { return tid == 0 })
	done := func(error) {}
	if span != nil && len(threads) > 0 {
		done = span(threads)
	}
	close(start)
	wg.Wait()
	err = errors.Join(errs...)
	done(err)
	return repeat, runs, err
}

// QuickTarget is the measurement length of --quick runs.
const QuickTarget = time.Millisecond
