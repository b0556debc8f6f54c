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

// Measured is the cost of bpf_stats measured at start, or why not.
type Measured struct {
	At   time.Time
	Why  string // when and why it was measured: at start, on demand, after a CPU hotplug
	Cost collectors.StatsCost
	Err  error
}

// AtStart is why the first measurement is made.
const AtStart = "at start, before bpfperfd turned stats on"

// Measure measures before the daemon turns stats on, and logs the
// figures; a host where stats are already on has no baseline, and says
// so.
func Measure(now time.Time, log *slog.Logger) Measured {
	c, err := collectors.MeasureStatsCost(collectors.DefaultStatsCostRule)
	switch {
	case err != nil:
		log.Info("cost of BPF stats not measured", "why", err)
	case !c.Settled:
		log.Warn("cost of BPF stats measured on a host too noisy to settle it", "ns_per_run", c.NsPerRun(), "wall_clock_ns_per_run", c.WallNsPerRun(),
			"settled", c.Settled, "pairs", c.Pairs, "spread_ns", fmt.Sprintf("%.0f-%.0f", c.SpreadLowNs, c.SpreadHighNs))
	default:
		log.Info("cost of BPF stats", "ns_per_run", c.NsPerRun(), "off_ns", c.OffNsPerRun, "on_ns", c.OnNsPerRun,
			"wall_clock_ns_per_run", c.WallNsPerRun(), "pairs", c.Pairs, "took", c.Took)
	}
	return Measured{At: now, Why: AtStart, Cost: c, Err: err}
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
	out.WallClockNsPerRun, out.SpreadNs, out.Pairs, out.Settled = c.WallNsPerRun(), []float64{c.SpreadLowNs, c.SpreadHighNs}, c.Pairs, c.Settled
	out.Detail = detail(c, m.Why)
	// A second's runs times the cost of each, over that second.
	cpu, _ := api.CPUPercent(out.RunsPerSec*out.NsPerRun, time.Second)
	out.CPUPercent = &cpu
	paid := out.RunsPerSec * out.NsPerRun * float64(out.DutyPercent) / 100 / 1e9
	out.PaidCPUSecondsPerSec = &paid
	return out
}

// detail says how the cost was measured: the rule, what it came to, and
// whether the two clocks agreed.
func detail(c collectors.StatsCost, why string) string {
	r := c.Rule
	how := fmt.Sprintf("an empty socket filter test-run in batches of %d, stats off then on, in blocks of %d pairs %v apart until a block moved the least batch of each under %.0f%% and the kernel's timer and the wall clock agreed within %.0f%% (%d to %d blocks); %s",
		r.Repeat, r.PairsPerBlock, r.Gap, r.Settle*100, r.Agree*100, r.MinBlocks, r.MaxBlocks, why)
	got := fmt.Sprintf("%d pairs in %v; the kernel's test-run timer %.1f ns, the wall clock %.1f ns; the pairs' own costs %.0f-%.0f ns (interquartile)",
		c.Pairs, c.Took.Round(time.Millisecond), c.NsPerRun(), c.WallNsPerRun(), c.SpreadLowNs, c.SpreadHighNs)
	switch {
	case !c.Settled:
		got += fmt.Sprintf("; not settled after %d blocks: the host was too noisy, the figure may be off", r.MaxBlocks)
	}
	return how + ". " + got
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
