package sampler

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/store"
)

// The events a duty cycle leaves in the store. History marks the points
// stored from a stats_duty event to the next stats_full, daemon_start or
// daemon_stop as estimates (query/estimates.go).
const (
	// EventStatsDuty: from here stats are on for only part of each
	// interval (at a fixed --stats.duty, stored at start).
	EventStatsDuty = "stats_duty"
	// EventStatsFull: from here stats are on all the time again (the
	// budget's share back at 100%).
	EventStatsFull = "stats_full"
)

// ParseDuty reads --stats.duty: "N%" or "N", a whole percent in 1..100.
func ParseDuty(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")))
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("%w: --stats.duty %q: want a percent from 1%% to 100%%", errs.BadConfig, s)
	}
	return n, nil
}

// ParseBudget reads --stats.budget: "N%" or "N", a percent of one CPU in
// 0..100; "0" or "off" is no budget.
func ParseBudget(s string) (float64, error) {
	v := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if v == "off" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) || n < 0 || n > 100 {
		return 0, fmt.Errorf("%w: --stats.budget %q: want a percent of one CPU from 0%% (off) to 100%%", errs.BadConfig, s)
	}
	return n, nil
}

// DutyCycle keeps run-time stats on for only part of each interval: a
// fixed share (--stats.duty below 100%), or under a budget (--stats.budget,
// the default) the share that keeps what stats cost the host's programs
// within it, all of each interval while that is possible (budget.go).
// Below 100% it closes the stats fd after each tick, and
// opens it again so that stats run for the last duty share of the
// interval, up to the next tick's reading. bpf_stats costs every run of
// every program on the host while on (status: stats cost); off, it costs
// nothing.
//
// An on part is never shorter than onPartSwitches times what turning
// stats on or off takes (Stats.SwitchTime, about 10 ms here): when in
// the switch the kernel starts or stops counting is not known, and 10 ms
// on parts (the 1% floor at a 1 s interval) read a steady load 36% and
// 77% high (TestStatsDutyFloor). A share whose part would be shorter
// gathers the parts of several intervals into one, at the end of one
// interval in every few (plan); the intervals between keep stats off
// all through.
//
// The kernel counts runs and run time only while stats are on, so each
// program's counters are scaled: a tick's deltas are multiplied by the
// wall time between readings over the time stats were on, and the scaled
// counters are what the rest of the daemon sees, stores and serves. In
// an interval with stats off all through, each program moves on at the
// rates of the last on part (carried). Rates and CPU % are then estimates
// of the whole interval; ns/run is exact for the runs counted. A program
// that ran only while stats were off shows no runs until an on part
// sees it run.
//
// Stats are global: another holder (bpftop, a second stats fd, the
// sysctl) keeps them on while ours is closed, and scaling would then
// overcount. After each pause a calibration program of the daemon's own
// is run once; if it was counted, stats are still on, ours is reopened at
// once and the interval counts as wholly on (scale 1). held says so.
type DutyCycle struct {
	stats    statsSwitch
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	percent int     // the share in force, 100 for all of each interval
	budget  *budget // nil for a fixed duty
	stopped bool
	// endOff ends the running off part's watchOff; othersOn counts the
	// off parts another holder cut short by turning stats on.
	endOff   chan struct{}
	othersOn int
	held     string // why the cycle is suspended now, "" while it runs
	lastRead time.Time
	lastOn   time.Duration
	// untilOn is how many intervals with stats off all through come
	// before the next that ends in an on part (plan); blind says the
	// interval running now is one of them, and blindPart is the on part
	// the plan gave when it began.
	untilOn   int
	blind     bool
	blindPart time.Duration
	// progs is each program's counters, updated in place each tick,
	// while tracking: at a share below 100%, and after one for the
	// programs whose scaled counters still differ from the kernel's.
	// Under a budget with stats on all the time and nothing scaled, the
	// kernel's counters are the figures and nothing is tracked: an idle
	// host pays no walk over its programs for the budget. sweeps counts
	// ticks, to drop programs gone.
	progs    map[uint32]dutyCounters
	tracking bool
	sweeps   uint64
	// lastFactor is the last interval's scale (1: stats on all of it);
	// lastCarried says stats were off all of it, and programs moved at the
	// last on part's rates.
	lastFactor  float64
	lastCarried bool
	// remeasure is a request to measure stats' cost again, done in the
	// off part after a tick (remeasure.go); measuredEvents are the
	// stats_cost events of the measurements since Transitions.
	remeasure      *remeasureRequest
	measuredEvents []store.Event
}

// statsSwitch is what a duty cycle does with the stats fd
// (collectors.Stats): turn it off and on, and know for how long it was on.
type statsSwitch interface {
	Pause() error
	Resume() error
	// OnTime is how long stats were on in all, up to at; CreditOn adds
	// time they were on through another fd of the daemon's own.
	OnTime(at time.Time) time.Duration
	CreditOn(d time.Duration)
	// SwitchTime is how long turning them on or off takes, 0 unknown.
	SwitchTime() time.Duration
}

// dutyCounters is one program's last reading as the kernel gave it, its
// scaled counters, and the rates of the last interval stats were on in.
type dutyCounters struct {
	raw                   collectors.Sample
	scaledTime, scaledCnt uint64
	sweep                 uint64 // the last sweep that read it
	// Per second of wall time, scaled; and what the last carried interval
	// left below a whole run or ns, so that slow rates still add up.
	rateTime, rateCnt float64
	fracTime, fracCnt float64
}

// carry moves the scaled counters on by the carried rates over wall.
func (p *dutyCounters) carry(wall time.Duration) {
	t := p.rateTime*wall.Seconds() + p.fracTime
	n := p.rateCnt*wall.Seconds() + p.fracCnt
	p.scaledTime += uint64(t)
	p.scaledCnt += uint64(n)
	p.fracTime, p.fracCnt = t-math.Floor(t), n-math.Floor(n)
}

// sample is the last reading with the scaled counters in place of the
// kernel's.
func (p *dutyCounters) sample() collectors.Sample {
	smp := p.raw
	smp.RunTimeNs, smp.RunCnt = p.scaledTime, p.scaledCnt
	return smp
}

// NewDutyCycle keeps stats, which must be on through the stats fd, on for
// percent of each interval.
func NewDutyCycle(stats statsSwitch, percent int, interval time.Duration, log *slog.Logger) *DutyCycle {
	return &DutyCycle{stats: stats, percent: percent, interval: interval, log: log, progs: map[uint32]dutyCounters{}, tracking: percent < 100, lastFactor: 1}
}

// NewBudgetCycle keeps stats, which must be on through the stats fd, on
// all of each interval while what they cost the programs (their runs/s
// times nsPerRun, the cost of one run measured at start) stays within
// budgetPercent of one CPU, and for the share that keeps it within when
// not.
func NewBudgetCycle(stats statsSwitch, budgetPercent, nsPerRun float64, interval time.Duration, log *slog.Logger) *DutyCycle {
	c := NewDutyCycle(stats, 100, interval, log)
	c.budget = &budget{percent: budgetPercent, nsPerRun: nsPerRun}
	return c
}

// onPartSwitches is how many times the stats switch's own time
// (Stats.SwitchTime) an on part lasts at least. The switch blurs each
// end of the part by up to half its time: at 10 times, a part's runs are
// known to within about 5%, and its rates are carried through 10 or so
// intervals at the 1% floor. More would leave the regression detector
// too few parts (it takes one sample a part): in the replays of
// internal/regress at 1%, parts gathered 20 intervals in one found 83.5%
// of +15% reloads alone at the default window, 10 in one 96%.
const onPartSwitches = 10

// unmeasuredSwitch stands in for the switch's time before the first is
// measured: what it took here (9.3-11 ms, 2 vCPUs).
const unmeasuredSwitch = 10 * time.Millisecond

// plan is the on part the share asks for: how long stats run before a
// reading, at the end of one interval in every. The share's part of one
// interval, where that is long enough against the switch; else the parts
// of every intervals in one, and at the most all of an interval, one in
// as many as keep the share (100 over the percent, rounded up).
func (c *DutyCycle) plan() (on time.Duration, every int) {
	if c.percent >= 100 {
		return c.interval, 1
	}
	share := c.interval * time.Duration(c.percent) / 100
	least := onPartSwitches * c.switchTime()
	if share >= least {
		return share, 1
	}
	every = int((least + share - 1) / share)
	if on = share * time.Duration(every); on > c.interval {
		return c.interval, (100 + c.percent - 1) / c.percent
	}
	return on, every
}

// scale rewrites samples, read at readAt (the real clock, when the sweep
// began), from the kernel's counters to the scaled ones, and returns
// them. all says they are every program loaded; otherwise they are those
// that changed, and the rest keep their scaled counters (their deltas
// are zero), unless the interval had stats off all through: then every
// program with a carried rate moves on at it, and is added to what is
// returned.
func (c *DutyCycle) scale(samples []collectors.Sample, readAt time.Time, all bool) []collectors.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	on := c.stats.OnTime(readAt)
	factor, carried := 1.0, false
	var wall time.Duration
	if !c.lastRead.IsZero() {
		var onPart time.Duration
		wall, onPart = readAt.Sub(c.lastRead), on-c.lastOn
		switch {
		case onPart >= wall:
		case c.blind && c.tracking && onPart < c.blindPart/2:
			// Stats were off for the interval but the moments after the
			// last reading, before they closed: scaled by those few ms,
			// a part's runs would be a guess far worse than carrying it.
			// More on time than that is another holder's (watchOff then
			// reopens our fd) or a measurement's: a reading of its own.
			carried = true
		case onPart >= time.Millisecond:
			factor = float64(wall) / float64(onPart)
		}
	}
	c.lastRead, c.lastOn, c.lastFactor, c.lastCarried = readAt, on, factor, carried
	if !c.tracking {
		return samples // stats on all the interval, nothing scaled before: exact
	}
	c.sweeps++
	// Under a budget, an interval with stats on all of it changes only
	// the programs that carry an offset from before; the rest are the
	// kernel's as they are, and not tracked.
	offsetsOnly := factor == 1 && !carried && c.budget != nil
	for i := range samples {
		smp := &samples[i]
		prev, ok := c.progs[smp.ID]
		if !ok && offsetsOnly {
			continue
		}
		next := dutyCounters{raw: *smp, sweep: c.sweeps}
		switch {
		case !ok || prev.raw.Tag != smp.Tag || smp.RunCnt < prev.raw.RunCnt || smp.RunTimeNs < prev.raw.RunTimeNs:
			// First seen (or the id reused): start from the kernel's.
			next.scaledTime, next.scaledCnt = smp.RunTimeNs, smp.RunCnt
		case carried:
			// Stats were off: what the kernel counted (another holder,
			// on between two of watchOff's questions) is left out, and the
			// program moves at the last on part's rates.
			next = prev
			next.raw, next.sweep = *smp, c.sweeps
			next.carry(wall)
		default:
			dTime, dCnt := smp.RunTimeNs-prev.raw.RunTimeNs, smp.RunCnt-prev.raw.RunCnt
			if factor != 1 { // at 1 (stats on all the interval) the deltas stay exact integers
				dTime, dCnt = uint64(float64(dTime)*factor), uint64(float64(dCnt)*factor)
			}
			next.scaledTime, next.scaledCnt = prev.scaledTime+dTime, prev.scaledCnt+dCnt
			if wall > 0 {
				next.rateTime, next.rateCnt = float64(dTime)/wall.Seconds(), float64(dCnt)/wall.Seconds()
			}
		}
		c.progs[smp.ID] = next
		*smp = next.sample()
	}
	if carried && !all {
		// The programs the sweep left out did not move in the kernel
		// (stats were off): those that ran in the last on part move on.
		for id, p := range c.progs {
			if p.sweep == c.sweeps || p.rateCnt == 0 {
				continue
			}
			p.carry(wall)
			p.sweep = c.sweeps
			c.progs[id] = p
			samples = append(samples, p.sample())
		}
	}
	if all && (offsetsOnly || len(c.progs) > len(samples)) { // some went away
		for id, p := range c.progs {
			if p.sweep != c.sweeps {
				delete(c.progs, id)
			}
		}
	}
	return samples
}

// Carried says whether stats were off all through the last interval, so
// that its figures are the last on part's rates carried on, not a
// reading of their own: a regression detector counts them once, not in
// every interval they were carried through.
func (c *DutyCycle) Carried() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastCarried
}

// observe sets the coming interval's share under a budget from the
// programs' runs per second over the last one (at full time: scaled where
// it was scaled), and starts or stops tracking programs' counters: latest
// is every program's counters as the rest of the daemon saw them this
// tick, asked for only when tracking starts.
func (c *DutyCycle) observe(latest func() []collectors.Sample, runsPerSec float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Measuring stats' cost turns them off for a moment: the coming
	// interval is scaled, like one under a share.
	defer func() {
		if c.remeasure != nil && !c.tracking {
			c.track(latest)
		}
	}()
	if c.budget == nil {
		return
	}
	c.percent = c.budget.next(c.percent, runsPerSec)
	switch {
	case c.percent < 100 && !c.tracking:
		c.track(latest)
	case c.percent >= 100 && c.tracking && c.lastFactor == 1 && !c.lastCarried:
		// Stats on all the time again: only the programs whose scaled
		// counters differ from the kernel's still need their offset.
		for id, p := range c.progs {
			if p.scaledTime == p.raw.RunTimeNs && p.scaledCnt == p.raw.RunCnt {
				delete(c.progs, id)
			}
		}
		c.tracking = len(c.progs) > 0
	}
}

// track starts tracking programs' counters: the next interval is scaled,
// and its deltas start from latest's counters, which are the kernel's
// (nothing was scaled). The caller holds mu.
func (c *DutyCycle) track(latest func() []collectors.Sample) {
	c.sweeps++
	for _, smp := range latest() {
		c.progs[smp.ID] = dutyCounters{raw: smp, scaledTime: smp.RunTimeNs, scaledCnt: smp.RunCnt, sweep: c.sweeps}
	}
	c.tracking = true
}

// forget drops what is kept of a program that went away.
func (c *DutyCycle) forget(id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.progs, id)
}

// afterTick turns stats off until the next on part: before the next
// tick, read at tickAt + interval, or before a later one where the plan
// gathers several intervals' parts into one.
func (c *DutyCycle) afterTick(tickAt time.Time) {
	c.measureIfAsked()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.blind = false
	if c.endOff != nil {
		close(c.endOff) // a late tick: the last off part's watch ends here
		c.endOff = nil
	}
	if c.percent >= 100 {
		c.resumeNow() // back from a share: on all the time
		c.untilOn = 0 // and the next share's first interval is read
		return
	}
	onPart, every := c.plan()
	c.untilOn = min(c.untilOn, every-1)
	ahead := c.untilOn // intervals off all through before the on part's
	if c.untilOn == 0 {
		c.untilOn = every - 1
	} else {
		c.untilOn--
	}
	offFor := time.Until(tickAt.Add(time.Duration(ahead+1)*c.interval - onPart))
	if offFor <= 0 {
		c.resumeNow() // the tick ran into the on part (or it is all of the interval)
		return
	}
	if err := c.stats.Pause(); err != nil {
		c.log.Warn("stats duty: pause", "err", err)
		return
	}
	probe, err := collectors.NewStatsProbe()
	on := false
	if err == nil {
		if on, err = probe.On(); err != nil || on {
			probe.Close()
		}
	}
	if err != nil || on {
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
	c.blind, c.blindPart = ahead > 0, onPart
	c.endOff = make(chan struct{})
	go c.watchOff(offFor, probe, c.endOff)
}

// watchOff runs through an off part of offFor: it reopens the stats fd
// when the part ends, or as soon as the probe finds stats counting
// before that. Another holder (bpftop, the sysctl) that turns stats on
// during the off part makes the kernel count from then on; scaling that
// interval by our on time alone would overcount it up to 1/share times
// (3.96x measured, issue 45). The probe runs every offPoll and once more
// as the part ends, and the time since the last poll that found stats
// off is credited as on time: the holder turned them on somewhere in it,
// so the scale is a lower bound, never an overcount. A holder on for less
// than a poll, between two polls, goes unseen (at most offPollMax of
// counts scaled). The probe's program lives only as long as the off part.
func (c *DutyCycle) watchOff(offFor time.Duration, probe *collectors.StatsProbe, stop chan struct{}) {
	defer probe.Close()
	end := time.NewTimer(offFor)
	defer end.Stop()
	poll := time.NewTicker(offPoll(offFor))
	defer poll.Stop()
	lastOff := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-end.C:
			// One last question: a holder that came since the last poll
			// has had the kernel counting, which the on part's time alone
			// would scale up.
			on, err := probe.On()
			c.endOffPart(stop, err == nil && on, lastOff)
			return
		case <-poll.C:
			polled := time.Now()
			on, err := probe.On()
			if err != nil || !on {
				if err == nil {
					lastOff = polled
				}
				continue
			}
			c.endOffPart(stop, true, lastOff)
			return
		}
	}
}

// endOffPart ends the off part that stop watches, unless the cycle
// stopped or a later tick began another: it reopens the stats fd, and
// where another holder was found counting (othersCounted) credits the
// time since lastOff, when stats were last seen off, as on time.
func (c *DutyCycle) endOffPart(stop chan struct{}, othersCounted bool, lastOff time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.endOff != stop {
		return
	}
	if othersCounted {
		c.stats.CreditOn(time.Since(lastOff))
		c.othersOn++
	}
	c.resumeNow()
}

// offPoll is how often watchOff asks whether stats count: fifty times an
// off part, between 5 ms and offPollMax. A question is one test run of an
// empty program and one info call, a few µs: 50 a second are about 0.02%
// of a CPU. What a holder's start costs the interval is at most a poll's
// worth of on time credited before it began: the finer, the closer.
func offPoll(offFor time.Duration) time.Duration {
	return min(max(offFor/50, 5*time.Millisecond), offPollMax)
}

const offPollMax = 50 * time.Millisecond

// roundSwitch rounds a switch's time for status: to 0.1 ms, or 10 µs
// below a millisecond, where hosts whose switch is quick sit.
func roundSwitch(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// switchTime is the stats switch's time plan goes by.
func (c *DutyCycle) switchTime() time.Duration {
	if sw := c.stats.SwitchTime(); sw > 0 {
		return sw
	}
	return unmeasuredSwitch
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
	if c.endOff != nil {
		close(c.endOff)
		c.endOff = nil
	}
}

// Status says in a few words how the cycle runs, for bpfperf status.
func (c *DutyCycle) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status()
}

// status is Status; the caller holds mu.
func (c *DutyCycle) status() string {
	var s string
	switch {
	case c.held != "":
		s = fmt.Sprintf("%d%%, suspended: %s", c.percent, c.held)
	case c.percent >= 100:
		s = "100%: stats on all the time; runs and run time exact"
	default:
		switch on, every := c.plan(); every {
		case 1:
			// The switch's time too: whether a host gathers its parts
			// (one whose switch takes 10 ms does at 1%, one whose switch
			// takes 0.4 ms does not) is otherwise a mystery.
			s = fmt.Sprintf("%d%%: stats on %v of each %v (the switch takes %v); runs and run time scaled from that time (estimates)",
				c.percent, on, c.interval, roundSwitch(c.switchTime()))
		default:
			s = fmt.Sprintf("%d%%: stats on %v of one %v interval in %d (a part at least %d times the switch's %v), its rates carried through the others; runs and run time scaled from that time (estimates)",
				c.percent, on, c.interval, every, onPartSwitches, roundSwitch(c.switchTime()))
		}
	}
	if c.othersOn > 0 {
		s += fmt.Sprintf("; another holder turned stats on during %d off parts (those intervals read low, never high)", c.othersOn)
	}
	if c.budget != nil {
		s = c.budget.describe() + "; " + s
	}
	return s
}

// Figures is the cycle as numbers: the share in force (100: stats on all
// the time), the budget (0 for a fixed duty) and, under a budget, what
// full-time stats would cost the programs now, both in % of one CPU.
func (c *DutyCycle) Figures() (percent int, budgetPercent, fullCostPercent float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budget == nil {
		return c.percent, 0, 0
	}
	return c.percent, c.budget.percent, c.budget.fullCost
}

// Transitions returns, once each, the events of the budget's changes
// since the last call, for the tick to store with its own time: a
// stats_duty event when the share drops below 100% (history marks what
// follows as estimates), stats_full when it is back at 100%.
func (c *DutyCycle) Transitions() []store.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	events := c.measuredEvents
	c.measuredEvents = nil
	if c.budget == nil || c.budget.announced == (c.percent < 100) {
		return events
	}
	c.budget.announced = c.percent < 100
	kind := EventStatsFull
	if c.budget.announced {
		kind = EventStatsDuty
	}
	return append(events, store.Event{Kind: kind, Detail: c.status()})
}
