package sampler

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
)

// budget chooses the duty cycle's share each tick from what stats would
// cost the programs at full time: every program's runs per second (the
// interval's, scaled to full time) times the measured cost of one run.
// While that is within the budget stats stay on all the time and every
// figure is exact; above it, the share is the budget over that cost.
type budget struct {
	percent  float64 // of one CPU
	nsPerRun float64 // stats' cost per run, measured at start
	// fullCost is what full-time stats cost the programs over the last
	// interval, in % of one CPU.
	fullCost float64
	// announced is whether a stats_duty event (below 100%) was the last
	// transition handed out, so each change is stored once.
	announced bool
}

// budgetReturn is how far under the budget full-time stats must cost
// before a share goes back to 100%, so that a load near the budget does
// not flip exact and estimated figures every tick.
const budgetReturn = 0.8

// next is the share for the coming interval, from the share in force and
// the programs' runs per second at full time.
func (b *budget) next(cur int, runsPerSec float64) int {
	b.fullCost = runsPerSec * b.nsPerRun / 1e9 * 100
	if b.fullCost <= b.percent && (cur >= 100 || b.fullCost <= budgetReturn*b.percent) {
		return 100
	}
	share := int(100 * b.percent / b.fullCost) // floor: at most the budget
	return max(1, min(share, 99))
}

// describe says what the budget is and what it finds, for status.
func (b *budget) describe() string {
	return fmt.Sprintf("budget %.3g%% of one CPU (full-time stats cost the programs %.3g%% now)", b.percent, b.fullCost)
}

// DutyConfig is how stats are kept on: --stats.duty and --stats.budget.
type DutyConfig struct {
	// Percent is a fixed share (--stats.duty): 1..99 cycles, 100 keeps
	// stats on all the time with no budget, 0 leaves it to the budget.
	Percent int
	// Budget is the % of one CPU stats may cost the programs
	// (--stats.budget); 0 turns it off.
	Budget float64
	// NsPerRun is what stats add to each run, measured at start, unless
	// NotMeasured says why it could not be (another holder kept stats on).
	NsPerRun    float64
	NotMeasured error
	Interval    time.Duration
	Stats       *collectors.Stats
	Logger      *slog.Logger
}

// StartDuty makes the duty cycle cfg asks for, or nil when stats stay on
// all the time: at --stats.duty 100%, with no budget, or where a budget
// cannot work (stats on through the sysctl, their cost not measured),
// which it logs. A fixed share needs the stats fd, and says so.
func StartDuty(cfg DutyConfig) (*DutyCycle, error) {
	log := cfg.Logger
	switch {
	case cfg.Percent > 0 && cfg.Percent < 100:
		if cfg.Stats.Mode() != collectors.StatsFD {
			return nil, fmt.Errorf("--stats.duty %d%% needs the stats fd (BPF_ENABLE_STATS, Linux 5.8+), but stats are on through the sysctl: %s", cfg.Percent, cfg.Stats.Detail())
		}
		duty := NewDutyCycle(cfg.Stats, cfg.Percent, cfg.Interval, log)
		log.Info("stats duty cycle", "detail", duty.Status())
		return duty, nil
	case cfg.Percent == 100 || cfg.Budget <= 0:
		return nil, nil
	case cfg.Stats.Mode() != collectors.StatsFD:
		log.Warn("stats budget off: stats stay on all the time", "why", "stats are on through the sysctl, which the daemon cannot pause", "detail", cfg.Stats.Detail())
		return nil, nil
	case cfg.NotMeasured != nil || cfg.NsPerRun <= 0:
		log.Warn("stats budget off: stats stay on all the time", "why", "their cost per run was not measured", "err", cfg.NotMeasured)
		return nil, nil
	}
	duty := NewBudgetCycle(cfg.Stats, cfg.Budget, cfg.NsPerRun, cfg.Interval, log)
	log.Info("stats budget", "detail", duty.Status())
	return duty, nil
}

// Fixed says whether the cycle runs at a fixed share (--stats.duty), not
// under a budget.
func (c *DutyCycle) Fixed() bool { return c.budget == nil }
