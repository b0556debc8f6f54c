package daemon

import (
	"iter"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/metrics"
	"github.com/bpfperf/bpfperf/daemon/sampler"
)

// metricsSource is what /metrics reads (metrics.Source), over the
// daemon's rooms.
type metricsSource struct{ d *Daemon }

var _ metrics.Source = metricsSource{}

func (s metricsSource) Programs(fn func(iter.Seq[metrics.Program])) {
	s.d.sampler.Read(func(v sampler.View) {
		fn(func(yield func(metrics.Program) bool) {
			for id, p := range v.Programs() {
				cur, _ := p.Latest()
				if !yield(metrics.Program{ID: id, Meta: p.Meta(), IdentityKey: p.IdentityKey(), Cur: cur}) {
					return
				}
			}
		})
	})
}

func (s metricsSource) PerfCounters(ids []uint32, into []*api.PerfCounters) { s.d.ctr.Last(ids, into) }

func (s metricsSource) SampledNs(ids []uint32, into []int64) bool {
	return s.d.prof.SampledNs(ids, into)
}

func (s metricsSource) Profiler() metrics.Profiler {
	w := s.d.prof.Windows()
	return metrics.Profiler{On: w.On, Windows: w.Windows, Lost: w.Lost, Passed: w.Filter.Passed, Dropped: w.Filter.Dropped, Filtered: w.Filter.On,
		TimedDrains: w.Drains.Timed, FullDrains: w.Drains.Full}
}

func (s metricsSource) State() metrics.State {
	d := s.d
	st := metrics.State{StoreBytes: d.store.Size(), StatsMode: string(d.stats.Mode()), Version: d.cfg.Version}
	st.StatsCostNsPerRun = d.statsCost.Load().NsPerRun()
	// Called outside the sampler's Read (collectDaemon).
	sc := d.statsCostStatus()
	st.StatsDuty, st.StatsPaid = float64(sc.DutyPercent)/100, sc.PaidCPUSecondsPerSec
	if sc.BudgetPercent != nil {
		st.StatsBudget = *sc.BudgetPercent / 100
	}
	return st
}

func (s metricsSource) Owners() []api.OwnerRow { return s.d.query.OwnersLive() }

func (s metricsSource) Triggers() []api.TriggerRow { return s.d.query.LatestTriggers() }

func (s metricsSource) Hooks() map[string]float64 {
	costs, window := s.d.prof.LastHooks()
	if costs == nil || window <= 0 {
		return nil
	}
	out := make(map[string]float64, len(costs))
	for hook, c := range costs {
		out[hook] = float64(c.Nanos) / float64(window.Nanoseconds())
	}
	return out
}

// Latency is the newest latency window of each loaded program the daemon
// timed since it started.
func (s metricsSource) Latency() []api.LatencyWindow {
	last := s.d.lat.Last()
	var out []api.LatencyWindow
	s.d.sampler.Read(func(v sampler.View) {
		for key, w := range last {
			if v.Live(key) != nil {
				out = append(out, w)
			}
		}
	})
	return out
}
