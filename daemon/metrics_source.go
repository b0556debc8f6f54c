package daemon

import (
	"iter"
	"maps"

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

func (s metricsSource) PerfCounters(ids []uint32, into []*api.PerfCounters) {
	d := s.d
	d.ctr.mu.Lock()
	defer d.ctr.mu.Unlock()
	for i, id := range ids {
		into[i] = d.lastCountersLocked(id)
	}
}

func (s metricsSource) SampledNs(ids []uint32, into []int64) bool {
	pr := &s.d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.prof == nil || pr.cfg.Every <= 0 {
		return false
	}
	for i, id := range ids {
		into[i] = pr.cpuNs[id]
	}
	return true
}

func (s metricsSource) Profiler() metrics.Profiler {
	pr := &s.d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return metrics.Profiler{On: pr.prof != nil, Windows: pr.windows, Lost: maps.Clone(pr.lost)}
}

func (s metricsSource) State() metrics.State {
	d := s.d
	st := metrics.State{StoreBytes: d.store.Size(), StatsMode: string(d.stats.Mode()), Version: d.cfg.Version}
	if sc := d.statsCost; sc.err == nil {
		st.StatsCostNsPerRun = sc.cost.NsPerRun()
	}
	return st
}

func (s metricsSource) Owners() []api.OwnerRow { return s.d.ownersLive() }
