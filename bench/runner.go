package bench

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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

// measureSeries takes n measurements of c on the calling thread.
func measureSeries(c *Case, repeat, n int, warmup bool) ([]float64, error) {
	out := make([]float64, 0, n)
	if warmup {
		if _, err := measureOnce(c, repeat); err != nil {
			return nil, err
		}
	}
	for len(out) < n {
		ns, err := measureOnce(c, repeat)
		if err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, nil
}

// measureOnce is one BPF_PROG_TEST_RUN call: the kernel's mean over repeat
// runs. An interrupted call is retried from scratch.
func measureOnce(c *Case, repeat int) (float64, error) {
	for tries := 0; ; tries++ {
		if c.Before != nil {
			if err := c.Before(); err != nil {
				return 0, err
			}
		}
		ret, ns, err := testRun(c.Program, c.Input, uint32(repeat))
		if errors.Is(err, errInterrupted) && tries < 100 {
			continue
		}
		if err != nil {
			return 0, err
		}
		if c.Want != nil && ret != *c.Want {
			return 0, fmt.Errorf("%w: returned %d, want %d", ErrWrongResult, ret, *c.Want)
		}
		return float64(ns), nil
	}
}

// calibrate picks runs per measurement so that one takes about target.
func calibrate(c *Case, target time.Duration, limit int) (int, error) {
	n := 1000
	if limit > 0 && n > limit {
		n = limit
	}
	start := time.Now()
	ns, err := measureOnce(c, n)
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
// of cfg.CPUs at once.
func measure(c *Case, cfg Config) (repeat int, runs []CPURun, err error) {
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

	runs = make([]CPURun, len(cpus))
	errs := make([]error, len(cpus))
	var wg sync.WaitGroup
	for i, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pinned(cpu, func() error {
				ms, err := measureSeries(c, repeat, cfg.Measures, cfg.Warmup)
				runs[i] = CPURun{CPU: cpu, Measurements: ms, Summary: Summarize(ms)}
				return err
			})
		}()
	}
	wg.Wait()
	return repeat, runs, errors.Join(errs...)
}

// QuickTarget is the measurement length of --quick runs.
const QuickTarget = time.Millisecond
