// Package statscost is what watching costs the programs: bpf_stats' cost
// per run, measured at start with stats off and on, and what it comes to
// now over every program's runs, at full time and at the share of each
// interval the duty cycle or the budget keeps stats on (daemon/sampler's
// duty.go and budget.go choose the share).
package statscost

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/sampler"
)

// The calibration: rounds of stats off then on, each this many test runs
// of an empty program (about 40 ms in all at ~60 ns a run).
const (
	rounds = 5
	repeat = 100_000
)

// Measured is the cost of bpf_stats measured at start, or why not.
type Measured struct {
	At   time.Time
	Cost collectors.StatsCost
	Err  error
}

// Measure measures before the daemon turns stats on, and logs the
// figures; a host where stats are already on has no baseline, and says
// so.
func Measure(now time.Time, log *slog.Logger) Measured {
	c, err := collectors.MeasureStatsCost(rounds, repeat)
	if err != nil {
		log.Info("cost of BPF stats not measured", "why", err)
	} else {
		log.Info("cost of BPF stats", "ns_per_run", c.NsPerRun(), "off_ns", c.OffNsPerRun, "on_ns", c.OnNsPerRun)
	}
	return Measured{At: now, Cost: c, Err: err}
}

// NsPerRun is what stats add to a run, 0 when not measured.
func (m Measured) NsPerRun() float64 {
	if m.Err != nil {
		return 0
	}
	return m.Cost.NsPerRun()
}

// Flags are the flags that decide how stats are kept on, and how they
// are on (fd or sysctl).
type Flags struct {
	Duty   int     // --stats.duty: 0 unset, 100 always on
	Budget float64 // --stats.budget, % of one CPU; 0 off
	Mode   collectors.StatsMode
}

// Status is the measurement and what it costs the host now, from every
// program's runs/s over the last sweep (scaled to full time under a
// duty cycle) and the sampler's duty figures.
func (m Measured) Status(runsPerSec float64, st sampler.Status, f Flags) *api.StatsCost {
	out := &api.StatsCost{RunsPerSec: runsPerSec, DutyPercent: st.DutyPercent, Budget: budgetWords(st, f)}
	if st.BudgetPercent > 0 {
		out.BudgetPercent = &st.BudgetPercent
	}
	if m.Err != nil {
		// collectors.ErrStatsHeld on a host where something else keeps
		// stats on: there is no stats-off baseline.
		out.Detail = "not measured: " + m.Err.Error()
		return out
	}
	c := m.Cost
	out.Measured, out.MeasuredAt = true, m.At
	out.NsPerRun, out.OffNsPerRun, out.OnNsPerRun = c.NsPerRun(), c.OffNsPerRun, c.OnNsPerRun
	out.Detail = fmt.Sprintf("empty socket filter test-run %d times per round, %d rounds alternating stats off and on, medians; at start, before bpfperfd turned stats on", c.Repeat, c.Rounds)
	// A second's runs times the cost of each, over that second.
	cpu, _ := api.CPUPercent(out.RunsPerSec*out.NsPerRun, time.Second)
	out.CPUPercent = &cpu
	paid := out.RunsPerSec * out.NsPerRun * float64(out.DutyPercent) / 100 / 1e9
	out.PaidCPUSecondsPerSec = &paid
	return out
}

// budgetWords says how the stats budget runs, or why it is off.
func budgetWords(st sampler.Status, f Flags) string {
	switch {
	case st.BudgetPercent > 0:
		return st.Duty
	case f.Duty > 0 && f.Duty < 100:
		return fmt.Sprintf("off: a fixed --stats.duty %d%%", f.Duty)
	case f.Duty == 100:
		return "off: --stats.duty 100% keeps stats on all the time"
	case f.Budget <= 0:
		return "off (--stats.budget 0): stats on all the time"
	case f.Mode != collectors.StatsFD:
		return "off: stats are on through the sysctl, which bpfperfd cannot pause; stats on all the time"
	default:
		return "off: the cost of a run was not measured, so the budget cannot be kept; stats on all the time"
	}
}
