// Package hooks measures what a BPF hook costs per event on this kernel,
// the part of a program's cost that bpf_stats does not see. run_time_ns
// covers the program only; entering and leaving the hook (the tracepoint
// glue, the trampoline, the kprobe handler, the XDP or TC context) is paid
// by every event too, and for a small program it is most of the cost.
//
// Each hook gets a minimal program (it returns at once, letting the event
// through) attached where real events reach it: a loop of getppid()
// system calls for the syscall hooks, UDP packets over a veth pair into
// this host's stack for XDP, TC and socket filters. The events are timed
// on one pinned thread, alternately without and with the program attached
// (stats off), for a number of rounds; the per-round difference is what
// the program costs each event, reported as its median and interquartile
// range. Rounds of their own, with stats on, read the program's run_time_ns
// and run_cnt: its run time per run, subtracted from the difference to
// leave the hook's share, and its runs per event, which says the events
// are the ones the program sees.
package hooks

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/collectors"
)

// Config says what to measure and how long.
type Config struct {
	// Hooks to measure, by name (Names); none means all.
	Hooks []string
	// Rounds of each measurement; the figures are over rounds.
	Rounds int
	// CPU the events are made on.
	CPU int
	// Events per round: system calls, and packets.
	Syscalls, Packets int
}

// DefaultConfig is what `bpfperf bench hooks` runs: rounds of about a
// tenth of a second each (a getppid() takes ~90 ns, a packet ~1 µs on a
// small VM), some 5 s a hook.
func DefaultConfig() Config {
	return Config{Rounds: 11, Syscalls: 1_000_000, Packets: 100_000}
}

// Result is one hook's figures, all in ns per event unless named
// otherwise, each over the rounds (bench.Summarize: median, IQR, ...).
type Result struct {
	Hook  string `json:"hook"`
	Event string `json:"event"`
	// Unavailable says why the hook was not measured (the kernel refused
	// its program or attachment, say); nothing else is set then.
	Unavailable string `json:"unavailable,omitempty"`

	Rounds int `json:"rounds,omitempty"`
	Events int `json:"events_per_round,omitempty"`
	// Without is the time per event with no program attached.
	Without bench.Summary `json:"without_ns,omitzero"`
	// Cost is what the program and its hook add to each event with
	// stats off: the time with it attached less Without, round by round.
	Cost bench.Summary `json:"cost_ns,omitzero"`
	// CostStats is the same with run-time stats on, as bpfperfd keeps
	// them while its budget allows.
	CostStats bench.Summary `json:"cost_stats_ns,omitzero"`
	// Run is the program's run time per run as the kernel counts it
	// (run_time_ns over run_cnt, in the rounds with stats on).
	Run bench.Summary `json:"run_ns,omitzero"`
	// Outside is CostStats less Run, round by round: what each event
	// costs that run_time_ns does not show (entering and leaving the
	// hook, setting up its context, and the part of stats' own
	// bookkeeping outside the clock they read).
	Outside bench.Summary `json:"outside_run_time_ns,omitzero"`
	// RunsPerEvent is the program's runs over the events made: 1 where
	// only the events made reach it.
	RunsPerEvent float64 `json:"runs_per_event,omitzero"`
	// StatsHeld says stats were on in the rounds meant to run without
	// them (another holder: bpfperfd, bpftop, the sysctl), so Cost is
	// with stats too.
	StatsHeld bool `json:"stats_held,omitempty"`
}

// hook is one kind of attach point and the events that reach it.
type hook struct {
	name, event string
	// open loads the program and makes the events' source.
	open func(cfg Config) (*site, error)
}

// site is a hook ready to measure: its program, how to attach it, and how
// to make n events on the calling thread.
type site struct {
	prog   *ebpf.Program
	attach func() (io.Closer, error)
	fire   func(n int) error
	events int
	close  func()
}

// Names are the hooks Measure knows, in the order it measures them.
func Names() []string {
	var out []string
	for _, h := range all() {
		out = append(out, h.name)
	}
	return out
}

func all() []hook {
	return slices.Concat(syscallHooks(), netHooks())
}

var (
	// ErrUnknownHook is a hook name Measure does not know.
	ErrUnknownHook = errors.New("unknown hook")
	// ErrBadConfig is a Config Measure cannot run.
	ErrBadConfig = errors.New("bad hooks config")
)

// Measure measures the hooks of cfg, one after another. A hook the kernel
// refuses gets a Result saying so; an error is for a bad Config or for a
// failure that stops every measurement.
func Measure(cfg Config) ([]Result, error) {
	hooks, err := pick(cfg.Hooks)
	if err != nil {
		return nil, err
	}
	// Kernels before 5.11 charge programs to RLIMIT_MEMLOCK; without
	// this, a refusal for that reason would read as a refused hook.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove the memlock limit: %w", err)
	}
	if cfg.Rounds < 1 || cfg.Syscalls < 1 || cfg.Packets < 1 {
		return nil, fmt.Errorf("%w: rounds and events per round must be at least 1", ErrBadConfig)
	}
	var set unix.CPUSet
	if cfg.CPU < 0 || cfg.CPU >= len(set)*64 {
		return nil, fmt.Errorf("%w: cpu %d is not a CPU number", ErrBadConfig, cfg.CPU)
	}
	set.Set(cfg.CPU)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("pin to cpu %d: %w", cfg.CPU, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	var out []Result
	for _, h := range hooks {
		r := Result{Hook: h.name, Event: h.event}
		s, err := h.open(cfg)
		if err != nil {
			r.Unavailable = err.Error()
			out = append(out, r)
			continue
		}
		err = measure(s, cfg.Rounds, &r)
		s.close()
		if err != nil {
			r = Result{Hook: h.name, Event: h.event, Unavailable: err.Error()}
		}
		out = append(out, r)
	}
	return out, nil
}

func pick(names []string) ([]hook, error) {
	known := all()
	if len(names) == 0 {
		return known, nil
	}
	var out []hook
	for _, n := range names {
		i := slices.IndexFunc(known, func(h hook) bool { return h.name == n })
		if i < 0 {
			return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownHook, n, strings.Join(Names(), ", "))
		}
		out = append(out, known[i])
	}
	return out, nil
}

// measure runs the rounds of one site. Each round times the events
// without the program, with it (stats as they are: off unless another
// holder keeps them on), and with it and stats on, reading its counters
// around that last part.
func measure(s *site, rounds int, r *Result) error {
	r.Rounds, r.Events = rounds, s.events
	held, err := collectors.StatsOnNow()
	if err != nil {
		return err
	}
	r.StatsHeld = held
	// Warm up the path (caches, lazily made state) with the program
	// attached once, so that no round pays for it.
	if err := withAttached(s, func() error { return s.fire(s.events / 10) }); err != nil {
		return err
	}
	var without, cost, costStats, run, outside, perEvent []float64
	for range rounds {
		a, err := timed(s)
		if err != nil {
			return err
		}
		var b float64
		if err := withAttached(s, func() (err error) { b, err = timed(s); return err }); err != nil {
			return err
		}
		c, ranFor, runs, err := timedWithStats(s)
		if err != nil {
			return err
		}
		perRun := float64(ranFor) / float64(runs)
		without, cost, costStats = append(without, a), append(cost, b-a), append(costStats, c-a)
		run, outside = append(run, perRun), append(outside, c-a-perRun)
		perEvent = append(perEvent, float64(runs)/float64(s.events))
	}
	r.Without, r.Cost, r.CostStats = bench.Summarize(without), bench.Summarize(cost), bench.Summarize(costStats)
	r.Run, r.Outside = bench.Summarize(run), bench.Summarize(outside)
	r.RunsPerEvent = bench.Summarize(perEvent).Median
	return nil
}

// timedWithStats makes one round of events with the program attached and
// run-time stats on, and returns the time per event and the program's run
// time and runs over the round.
func timedWithStats(s *site) (perEvent float64, ranFor time.Duration, runs uint64, err error) {
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("enable stats: %w", err)
	}
	defer stats.Close()
	before, err := s.prog.Stats()
	if err != nil {
		return 0, 0, 0, err
	}
	if err := withAttached(s, func() (err error) { perEvent, err = timed(s); return err }); err != nil {
		return 0, 0, 0, err
	}
	after, err := s.prog.Stats()
	if err != nil {
		return 0, 0, 0, err
	}
	if runs = after.RunCount - before.RunCount; runs == 0 {
		return 0, 0, 0, fmt.Errorf("the program never ran: the events did not reach it")
	}
	return perEvent, after.Runtime - before.Runtime, runs, nil
}

// withAttached runs f with the site's program attached, and detaches it.
func withAttached(s *site, f func() error) error {
	l, err := s.attach()
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	err = f()
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("detach: %w", cerr)
	}
	return err
}

// partEvents is how many events timed makes in each part of a round:
// a part takes a millisecond or less, shorter than a time slice, so that
// on a busy CPU some parts run whole.
const partEvents = 1000

// timed makes one round of events, partEvents at a time, and returns the
// time per event of the quickest part. Whatever else runs on the CPU (a
// task scheduled in, an interrupt) only adds time to the parts it falls
// in, so the quickest is the events' own cost: a whole round timed at
// once read getppid() at 3.6 µs, 40 times its cost, on a host whose two
// CPUs were both busy with other work, and the hooks' costs negative.
func timed(s *site) (float64, error) {
	best := math.Inf(1)
	for done := 0; done < s.events; {
		n := min(partEvents, s.events-done)
		start := time.Now()
		if err := s.fire(n); err != nil {
			return 0, err
		}
		best = min(best, float64(time.Since(start).Nanoseconds())/float64(n))
		done += n
	}
	return best, nil
}

// closer turns a func into an io.Closer.
type closer func() error

func (c closer) Close() error { return c() }
