package query

import (
	"fmt"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/store"
)

// CounterHistory lists the finished windows of every instance PROG names,
// oldest first: for each pair of consecutive samples that counted runs,
// the per-run figures of what happened between them.
func (q *Query) CounterHistory(ref string, since, until time.Time) (api.CounterHistory, error) {
	if !until.After(since) {
		return api.CounterHistory{}, fmt.Errorf("%w: until (%s) must be after since (%s)", errs.BadRequest, until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	insts, err := q.Resolve(ref)
	if err != nil {
		return api.CounterHistory{}, err
	}
	h := api.CounterHistory{Program: ref, Since: since, Until: until, Points: []api.CounterHistoryPoint{}}
	for _, inst := range insts {
		samples, err := q.Store.CounterSeries(inst.Rec.Key, since, until)
		if err != nil {
			return api.CounterHistory{}, err
		}
		// Exact windows lie between consecutive exact samples; a sampled
		// sample is a window of its own.
		var prevExact *store.CounterSample
		for i := range samples {
			var p *api.PerfCounters
			switch s := samples[i]; s.Mechanism {
			case store.CounterSampled:
				p = counters.SampledFromStore(s)
			case store.CounterExact:
				if prevExact != nil {
					p = counters.WindowBetween(*prevExact, s)
				}
				prevExact = &samples[i]
			}
			if p != nil {
				h.Points = append(h.Points, api.CounterHistoryPoint{ID: inst.Rec.ID, PerfCounters: *p})
			}
			if len(h.Points) > maxPoints {
				return api.CounterHistory{}, fmt.Errorf("%w: more than %d windows; use a shorter range", errs.BadRequest, maxPoints)
			}
		}
	}
	sort.SliceStable(h.Points, func(i, j int) bool { return h.Points[i].WindowEnd.Before(h.Points[j].WindowEnd) })
	return h, nil
}
