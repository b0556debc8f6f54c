package collectors

import (
	"errors"
	"fmt"
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

// StatsCost is what bpf_stats adds to every run of every program while
// it is on, measured with a calibration program run by BPF_PROG_TEST_RUN
// with stats off and on, alternated.
type StatsCost struct {
	OffNsPerRun float64 // median ns per run with stats off
	OnNsPerRun  float64 // and on
	Rounds      int
	Repeat      int // runs per round and state
}

// NsPerRun is the cost of stats per program run.
func (c StatsCost) NsPerRun() float64 { return c.OnNsPerRun - c.OffNsPerRun }

// calibrationPacket is what the calibration program is test-run on: a
// minimal Ethernet frame.
var calibrationPacket = make([]byte, 64)

// MeasureStatsCost runs an empty socket filter repeat times per round with
// stats off and then on (its own BPF_ENABLE_STATS fd), for rounds rounds,
// and returns the medians. Each stats-off round must leave the program's
// run count unchanged; if it moved, someone else keeps stats on and the
// answer is ErrStatsHeld. The program and the stats fd are closed before
// it returns.
func MeasureStatsCost(rounds, repeat int) (StatsCost, error) {
	c := StatsCost{Rounds: rounds, Repeat: repeat}
	prog, err := calibrationProgram()
	if err != nil {
		return c, err
	}
	defer markOwn(prog)()
	defer prog.Close()
	var offs, ons []time.Duration
	for range rounds {
		before, err := runCount(prog)
		if err != nil {
			return c, err
		}
		_, off, err := prog.Benchmark(calibrationPacket, repeat, nil)
		if err != nil {
			return c, fmt.Errorf("test run: %w", err)
		}
		if after, err := runCount(prog); err != nil {
			return c, err
		} else if after != before {
			return c, ErrStatsHeld
		}
		stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			return c, wrapErrno("enable stats", err)
		}
		_, on, err := prog.Benchmark(calibrationPacket, repeat, nil)
		stats.Close()
		if err != nil {
			return c, fmt.Errorf("test run: %w", err)
		}
		offs, ons = append(offs, off), append(ons, on)
	}
	c.OffNsPerRun, c.OnNsPerRun = float64(medianDuration(offs)), float64(medianDuration(ons))
	return c, nil
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
	prog, err := calibrationProgram()
	if err != nil {
		return false, err
	}
	defer markOwn(prog)()
	defer prog.Close()
	if _, _, err := prog.Benchmark(calibrationPacket, 1, nil); err != nil {
		return false, fmt.Errorf("test run: %w", err)
	}
	n, err := runCount(prog)
	return n > 0, err
}

func runCount(prog *ebpf.Program) (uint64, error) {
	s, err := prog.Stats()
	if err != nil {
		return 0, fmt.Errorf("calibration program stats: %w", err)
	}
	return s.RunCount, nil
}

func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
