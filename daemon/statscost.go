package daemon

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
	statsCostRounds = 5
	statsCostRepeat = 100_000
)

// statsCost is the cost of bpf_stats measured at start, or why not.
type statsCost struct {
	at   time.Time
	cost collectors.StatsCost
	err  error
}

// measureStatsCost measures before the daemon turns stats on, and logs
// the figures; a host where stats are already on has no baseline, and
// says so.
func measureStatsCost(now time.Time, log *slog.Logger) statsCost {
	c, err := collectors.MeasureStatsCost(statsCostRounds, statsCostRepeat)
	if err != nil {
		log.Info("cost of BPF stats not measured", "why", err)
	} else {
		log.Info("cost of BPF stats", "ns_per_run", c.NsPerRun(), "off_ns", c.OffNsPerRun, "on_ns", c.OnNsPerRun)
	}
	return statsCost{at: now, cost: c, err: err}
}

// statsCostStatus is the measurement and what it costs the host now:
// every program's runs/s over the last sweep times the cost per run.
func (d *Daemon) statsCostStatus() *api.StatsCost {
	sc := d.statsCost
	out := &api.StatsCost{}
	d.sampler.Read(func(v sampler.View) { out.RunsPerSec = v.HostRunsPerSec() })
	if sc.err != nil {
		// collectors.ErrStatsHeld on a host where something else keeps
		// stats on: there is no stats-off baseline.
		out.Detail = "not measured: " + sc.err.Error()
		return out
	}
	c := sc.cost
	out.Measured, out.MeasuredAt = true, sc.at
	out.NsPerRun, out.OffNsPerRun, out.OnNsPerRun = c.NsPerRun(), c.OffNsPerRun, c.OnNsPerRun
	out.Detail = fmt.Sprintf("empty socket filter test-run %d times per round, %d rounds alternating stats off and on, medians; at start, before bpfperfd turned stats on", c.Repeat, c.Rounds)
	// A second's runs times the cost of each, over that second.
	cpu, _ := api.CPUPercent(out.RunsPerSec*out.NsPerRun, time.Second)
	out.CPUPercent = &cpu
	return out
}
