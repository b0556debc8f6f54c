package collectors

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// ErrStatsHeld says run-time stats were already on when the cost of
// stats was to be measured: another process holds a stats fd, or the
// sysctl is 1. Stats are global, so there is no "off" to compare with.
var ErrStatsHeld = errors.New("BPF run-time stats are already on (another stats fd holder, or kernel.bpf_stats_enabled=1): no stats-off baseline to measure against")

// StatsCostRule is how the cost of stats is measured: pairs of batches of
// test runs of an empty program, stats off then on, in blocks a pause
// apart, until a whole block leaves the figure where it was and the two
// clocks agree on it.
//
// Each batch is timed twice: by the kernel's test-run timer, which stops
// while the task is rescheduled (so a busy host does not inflate it), and
// by the wall clock around the call (a second mechanism, which counts
// everything). Interruptions only ever add time, so the cost is the least
// batch with stats on minus the least with stats off, by each clock; a
// median moved 44% on a host busy for the 30 ms a measurement took.
//
// A VM's vCPU also has slow spells, 3 to 100 ms and more, in which a run
// with stats on is 10-20% slower throughout (the hypervisor's doing:
// 2026-11-28's AMD EPYC VM had them in 11% of 20 s of back-to-back
// pairs, and CI's read 80 ns where the wall clock said 68 just after, a
// spell over all 16 pairs and 54 ms of one measurement). No least batch
// gets out of a spell that covers the whole measurement, so the blocks
// are spread over a few hundred ms: the least comes from outside it.
type StatsCostRule struct {
	Repeat        int           // test runs per batch
	PairsPerBlock int           // off/on pairs between two looks at the figure
	MinBlocks     int           // blocks run before the figure may settle
	MaxBlocks     int           // blocks run at most, settled or not
	Settle        float64       // a block that moves the cost by less than this share (or 0.5 ns) settles it
	Agree         float64       // the share the wall clock's cost may differ by for the two to agree
	Gap           time.Duration // pause between two blocks, so the blocks span the host's slow spells
}

// DefaultStatsCostRule takes 4 to 12 blocks of 8 pairs of 20,000 runs,
// 100 ms apart: 0.4 to 1.5 s at ~25 ns a run off and ~95 on, a batch
// short enough (about 2 ms) that many fall between two interruptions even
// on a host whose CPUs are all busy, and the first four blocks spread over
// 0.4 s.
var DefaultStatsCostRule = StatsCostRule{Repeat: 20_000, PairsPerBlock: 8, MinBlocks: 4, MaxBlocks: 12, Settle: 0.02, Agree: 0.10, Gap: 100 * time.Millisecond}

// settleFloorNs is the least move that unsettles the figure: the kernel's
// timer gives whole ns per run.
const settleFloorNs = 0.5

// StatsCost is what bpf_stats adds to every run of every program while
// it is on, measured under a StatsCostRule.
type StatsCost struct {
	Rule StatsCostRule
	// OffNsPerRun and OnNsPerRun are the least ns per run of a batch with
	// stats off and on, by the kernel's test-run timer; WallOffNsPerRun
	// and WallOnNsPerRun the same by the wall clock.
	OffNsPerRun, OnNsPerRun         float64
	WallOffNsPerRun, WallOnNsPerRun float64
	// SpreadLowNs and SpreadHighNs are the interquartile range of each
	// pair's own cost (its on batch minus its off batch, kernel-timed):
	// how much the host moved while it was measured.
	SpreadLowNs, SpreadHighNs float64
	Pairs                     int // off/on pairs run
	// StatsOnFor is how long the measurement's own stats fd was open, in
	// all: every program's runs counted meanwhile, so a caller that
	// scales counters by the time stats were on adds it.
	StatsOnFor time.Duration
	Settled    bool          // a block left the cost within Rule.Settle, the clocks agreeing, before MaxBlocks
	Took       time.Duration // wall time of the whole measurement
}

// NsPerRun is the cost of stats per program run, by the kernel's timer.
func (c StatsCost) NsPerRun() float64 { return c.OnNsPerRun - c.OffNsPerRun }

// WallNsPerRun is the same cost by the wall clock.
func (c StatsCost) WallNsPerRun() float64 { return c.WallOnNsPerRun - c.WallOffNsPerRun }

// Agrees says whether the two clocks give the same cost, within
// Rule.Agree (and the timer's whole nanosecond).
func (c StatsCost) Agrees() bool { return agree(c.NsPerRun(), c.WallNsPerRun(), c.Rule.Agree) }

func agree(kernel, wall, share float64) bool { return math.Abs(wall-kernel) <= share*kernel+1 }

// calibrationPacket is what the calibration program is test-run on: a
// minimal Ethernet frame.
var calibrationPacket = make([]byte, 64)

// MeasureStatsCost measures what stats cost a run under rule, with a
// stats fd of its own for the on batches. Each stats-off batch must leave
// the program's run count unchanged; if it moved, someone else keeps
// stats on and the answer is ErrStatsHeld. The program and the stats fd
// are closed before it returns.
func MeasureStatsCost(rule StatsCostRule) (c StatsCost, err error) {
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	prog, err := calibrationProgram()
	if err != nil {
		return StatsCost{Rule: rule}, err
	}
	defer MarkOwn(prog)()
	defer prog.Close()
	r := costRunner{prog: prog, repeat: rule.Repeat}
	return measureUnder(rule, r.pair, time.Sleep)
}

// pairTimes is one pair of batches, stats off then on: ns per run by the
// kernel's test-run timer and by the wall clock.
type pairTimes struct {
	off, on, wallOff, wallOn float64
	statsOn                  time.Duration // how long the stats fd was open for the on batch
}

// measureUnder is the rule's arithmetic over pairs run by pair: the least
// batch of each kind by each clock, block after block, pause(rule.Gap)
// between two, until it settles.
func measureUnder(rule StatsCostRule, pair func() (pairTimes, error), pause func(time.Duration)) (StatsCost, error) {
	c := StatsCost{Rule: rule}
	inf := math.Inf(1)
	least := pairTimes{off: inf, on: inf, wallOff: inf, wallOn: inf}
	var pairCosts []float64
	cost := inf
	for block := 1; block <= rule.MaxBlocks; block++ {
		if block > 1 {
			pause(rule.Gap)
		}
		for range rule.PairsPerBlock {
			p, err := pair()
			if err != nil {
				return c, err
			}
			least = pairTimes{off: min(least.off, p.off), on: min(least.on, p.on), wallOff: min(least.wallOff, p.wallOff), wallOn: min(least.wallOn, p.wallOn)}
			pairCosts = append(pairCosts, p.on-p.off)
			c.StatsOnFor += p.statsOn
		}
		prev := cost
		cost = least.on - least.off
		moved := math.Abs(cost-prev) > max(rule.Settle*cost, settleFloorNs)
		if block >= rule.MinBlocks && !moved && agree(cost, least.wallOn-least.wallOff, rule.Agree) {
			c.Settled = true
			break
		}
	}
	c.OffNsPerRun, c.OnNsPerRun = least.off, least.on
	c.WallOffNsPerRun, c.WallOnNsPerRun = least.wallOff, least.wallOn
	c.SpreadLowNs, c.SpreadHighNs = quartiles(pairCosts)
	c.Pairs = len(pairCosts)
	return c, nil
}

// costRunner runs the calibration program's batches.
type costRunner struct {
	prog   *ebpf.Program
	repeat int
}

// pair runs one batch with stats off and one with them on (a stats fd of
// its own). A stats-off batch the kernel counted means another holder.
func (r costRunner) pair() (p pairTimes, err error) {
	before, err := runCount(r.prog)
	if err != nil {
		return p, err
	}
	if p.off, p.wallOff, err = r.batch(); err != nil {
		return p, err
	}
	if after, err := runCount(r.prog); err != nil {
		return p, err
	} else if after != before {
		return p, ErrStatsHeld
	}
	// Turning stats on or off patches the kernel's code (a static key),
	// which takes milliseconds in a VM (4-5 ms each way here), and they
	// count from some moment within: they are taken to be on from the
	// middle of the call that turns them on to the middle of the one that
	// turns them off.
	opening := time.Now()
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return p, wrapErrno("enable stats", err)
	}
	opened := time.Now()
	p.on, p.wallOn, err = r.batch()
	closing := time.Now()
	stats.Close()
	p.statsOn = closing.Sub(opened) + (opened.Sub(opening)+time.Since(closing))/2
	return p, err
}

// batch test-runs the program repeat times: ns per run by the kernel's
// timer and by the wall clock.
func (r costRunner) batch() (kernel, wall float64, err error) {
	start := time.Now()
	_, d, err := r.prog.Benchmark(calibrationPacket, r.repeat, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("test run: %w", err)
	}
	return float64(d), float64(time.Since(start)) / float64(r.repeat), nil
}

// quartiles is the first and third quartile of v (nearest rank).
func quartiles(v []float64) (q1, q3 float64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/4], s[(3*len(s))/4]
}

// calibrationProgram loads an empty socket filter of the daemon's own.
func calibrationProgram() (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "bpfperf_cal", Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("load calibration program: %w", err)
	}
	return prog, nil
}

// StatsOnNow says whether run-time stats count at this moment: it runs a
// calibration program of its own once and reads its run count. After the
// daemon closed its own stats fd, true means another holder keeps them
// on. The program is closed before it returns.
func StatsOnNow() (bool, error) {
	p, err := NewStatsProbe()
	if err != nil {
		return false, err
	}
	defer p.Close()
	return p.On()
}

// StatsProbe asks, as often as needed, whether run-time stats count at
// that moment: a calibration program of the daemon's own (marked so),
// run once a question, whose run count moves only while stats are on. It
// holds one program until Close: keep it for a bounded time.
type StatsProbe struct {
	prog   *ebpf.Program
	unmark func()
	runs   uint64
}

// NewStatsProbe loads the probe's program.
func NewStatsProbe() (*StatsProbe, error) {
	prog, err := calibrationProgram()
	if err != nil {
		return nil, err
	}
	return &StatsProbe{prog: prog, unmark: MarkOwn(prog)}, nil
}

// On runs the program once and says whether the kernel counted the run.
func (p *StatsProbe) On() (bool, error) {
	if _, _, err := p.prog.Benchmark(calibrationPacket, 1, nil); err != nil {
		return false, fmt.Errorf("test run: %w", err)
	}
	n, err := runCount(p.prog)
	if err != nil {
		return false, err
	}
	on := n > p.runs
	p.runs = n
	return on, nil
}

// Close unloads the probe's program.
func (p *StatsProbe) Close() {
	p.prog.Close()
	p.unmark()
}

func runCount(prog *ebpf.Program) (uint64, error) {
	s, err := prog.Stats()
	if err != nil {
		return 0, fmt.Errorf("calibration program stats: %w", err)
	}
	return s.RunCount, nil
}
