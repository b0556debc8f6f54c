package sampler

import (
	"errors"
	"fmt"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/store"
)

// EventStatsCost: stats' cost per run was measured again while the daemon
// ran (on demand, or after the online CPUs changed); the detail says why
// and what it came to.
const EventStatsCost = "stats_cost"

// ErrRemeasurePending says a measurement is already asked for.
var ErrRemeasurePending = errors.New("a measurement of the stats' cost is already under way")

// remeasureRequest is one asked-for measurement: why it was asked, and
// whom to tell.
type remeasureRequest struct {
	why  string
	done func(collectors.StatsCost, error)
}

// Remeasure asks for stats' cost per run to be measured again, right
// after the next tick: stats are turned off for the measurement (a few
// tenths of a second, up to seconds on a busy host) and that interval's
// counters scaled from the time they were on, as under a share. Stats are
// global, so the measurement needs nobody else to hold them on
// (collectors.ErrStatsHeld otherwise). A measurement that settled becomes
// the budget's cost per run; done gets it either way, from the sampler's
// goroutine.
func (c *DutyCycle) Remeasure(why string, done func(collectors.StatsCost, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.remeasure != nil {
		return ErrRemeasurePending
	}
	c.remeasure = &remeasureRequest{why: why, done: done}
	return nil
}

// measureIfAsked measures stats' cost when asked and the interval is
// tracked (observe started it, so the pause is scaled out), without
// holding mu: status answers meanwhile.
func (c *DutyCycle) measureIfAsked() {
	c.mu.Lock()
	req := c.remeasure
	if req == nil || !c.tracking || c.stopped {
		c.mu.Unlock()
		return
	}
	c.remeasure = nil
	c.mu.Unlock()

	cost, err := c.measure()
	c.mu.Lock()
	detail := fmt.Sprintf("%s: not measured: %v", req.why, err)
	if err == nil {
		detail = fmt.Sprintf("%s: %.1f ns per run (wall clock %.1f), %d pairs, settled %v", req.why, cost.NsPerRun(), cost.WallNsPerRun(), cost.Pairs, cost.Settled)
		if c.budget != nil && cost.Settled {
			c.budget.nsPerRun = cost.NsPerRun()
		}
	}
	c.measuredEvents = append(c.measuredEvents, store.Event{Kind: EventStatsCost, Detail: detail})
	c.mu.Unlock()
	c.log.Info("cost of BPF stats measured again", "detail", detail)
	req.done(cost, err)
}

// measure turns our stats off, measures and turns them back on.
func (c *DutyCycle) measure() (collectors.StatsCost, error) {
	if err := c.stats.Pause(); err != nil {
		return collectors.StatsCost{}, fmt.Errorf("pause stats: %w", err)
	}
	cost, err := collectors.MeasureStatsCost(collectors.DefaultStatsCostRule)
	// The measurement's on batches held stats on with an fd of their own:
	// every program's runs counted then, so that time is on time.
	c.stats.CreditOn(cost.StatsOnFor)
	if rerr := c.stats.Resume(); rerr != nil {
		c.log.Warn("stats cost: resume stats", "err", rerr)
	}
	return cost, err
}
