package sampler

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
)

// ParseDuty reads --stats.duty: "N%" or "N", a whole percent in 1..100.
func ParseDuty(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")))
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("%w: --stats.duty %q: want a percent from 1%% to 100%%", errs.BadConfig, s)
	}
	return n, nil
}

// DutyCycle keeps run-time stats on for only part of each interval
// (--stats.duty below 100%): after each tick it closes the stats fd, and
// opens it again so that stats run for the last duty share of the
// interval, up to the next tick's reading. bpf_stats costs every run of
// every program on the host while on (status: stats cost); off, it costs
// nothing.
//
// The kernel counts runs and run time only while stats are on, so each
// program's counters are scaled: a tick's deltas are multiplied by the
// wall time between readings over the time stats were on, and the scaled
// counters are what the rest of the daemon sees, stores and serves. Rates
// and CPU % are then estimates of the whole interval; ns/run is exact for
// the runs counted. A program that ran only while stats were off shows no
// runs for that interval.
//
// Stats are global: another holder (bpftop, a second stats fd, the
// sysctl) keeps them on while ours is closed, and scaling would then
// overcount. After each pause a calibration program of the daemon's own
// is run once; if it was counted, stats are still on, ours is reopened at
// once and the interval counts as wholly on (scale 1). held says so.
type DutyCycle struct {
	stats    *collectors.Stats
	percent  int
	interval time.Duration
	log      *slog.Logger

	mu       sync.Mutex
	resume   *time.Timer
	stopped  bool
	held     string // why the cycle is suspended now, "" while it runs
	lastRead time.Time
	lastOn   time.Duration
	progs    map[uint32]dutyCounters
}

// dutyCounters is one program's last raw counters and its scaled ones.
type dutyCounters struct {
	tag                   [8]byte
	rawTime, rawCnt       uint64
	scaledTime, scaledCnt uint64
}

// NewDutyCycle keeps stats, which must be on through the stats fd, on for
// percent of each interval.
func NewDutyCycle(stats *collectors.Stats, percent int, interval time.Duration, log *slog.Logger) *DutyCycle {
	return &DutyCycle{stats: stats, percent: percent, interval: interval, log: log, progs: map[uint32]dutyCounters{}}
}

// onPart is how long stats run before each reading.
func (c *DutyCycle) onPart() time.Duration {
	return c.interval * time.Duration(c.percent) / 100
}

// scale rewrites samples, read at readAt (the real clock, when the sweep
// began), from the kernel's counters to the scaled ones.
func (c *DutyCycle) scale(samples []collectors.Sample, readAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	on := c.stats.OnTime(readAt)
	factor := 1.0
	if !c.lastRead.IsZero() {
		wall, onPart := readAt.Sub(c.lastRead), on-c.lastOn
		if onPart >= time.Millisecond && wall > onPart {
			factor = float64(wall) / float64(onPart)
		}
	}
	c.lastRead, c.lastOn = readAt, on
	seen := make(map[uint32]dutyCounters, len(samples))
	for i := range samples {
		smp := &samples[i]
		prev, ok := c.progs[smp.ID]
		next := dutyCounters{tag: smp.Tag, rawTime: smp.RunTimeNs, rawCnt: smp.RunCnt}
		if ok && prev.tag == smp.Tag && smp.RunCnt >= prev.rawCnt && smp.RunTimeNs >= prev.rawTime {
			next.scaledTime = prev.scaledTime + uint64(float64(smp.RunTimeNs-prev.rawTime)*factor)
			next.scaledCnt = prev.scaledCnt + uint64(float64(smp.RunCnt-prev.rawCnt)*factor)
		} else {
			// First seen (or the id reused): start from the kernel's.
			next.scaledTime, next.scaledCnt = smp.RunTimeNs, smp.RunCnt
		}
		seen[smp.ID] = next
		smp.RunTimeNs, smp.RunCnt = next.scaledTime, next.scaledCnt
	}
	c.progs = seen
}

// afterTick turns stats off until the on part before the next tick, read
// at tickAt + interval.
func (c *DutyCycle) afterTick(tickAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	offFor := time.Until(tickAt.Add(c.interval - c.onPart()))
	if offFor <= 0 {
		return // the tick ran into the on part
	}
	if err := c.stats.Pause(); err != nil {
		c.log.Warn("stats duty: pause", "err", err)
		return
	}
	if on, err := collectors.StatsOnNow(); err != nil || on {
		why := "another holder keeps BPF run-time stats on (a stats fd, or kernel.bpf_stats_enabled=1)"
		if err != nil {
			why = "cannot tell whether stats went off: " + err.Error()
		}
		if c.held != why {
			c.log.Warn("stats duty suspended: stats stay on all the time", "why", why)
		}
		c.held = why
		c.resumeNow()
		return
	}
	if c.held != "" {
		c.log.Info("stats duty resumed", "duty", fmt.Sprintf("%d%%", c.percent))
		c.held = ""
	}
	c.resume = time.AfterFunc(offFor, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.stopped {
			c.resumeNow()
		}
	})
}

// resumeNow reopens the stats fd; the caller holds mu.
func (c *DutyCycle) resumeNow() {
	if err := c.stats.Resume(); err != nil {
		c.log.Warn("stats duty: resume", "err", err)
	}
}

// Stop ends the cycle; Restore then closes our fd if it is open.
func (c *DutyCycle) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.resume != nil {
		c.resume.Stop()
	}
}

// Status says in a few words how the cycle runs, for bpfperf status.
func (c *DutyCycle) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf("%d%%: stats on %v of each %v; runs and run time scaled from that time (estimates)", c.percent, c.onPart(), c.interval)
	if c.held != "" {
		s = fmt.Sprintf("%d%%, suspended: %s", c.percent, c.held)
	}
	return s
}
