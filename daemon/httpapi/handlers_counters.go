package httpapi

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/store"
)

func (s *server) countersList(w http.ResponseWriter, r *http.Request) {
	reply(w, s.d.Counters.List(), nil)
}

func (s *server) countersEnable(enable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ref, err := progParam(q)
		if err != nil {
			reply(w, nil, err)
			return
		}
		var window time.Duration
		if v := q.Get("window"); v != "" {
			if window, err = time.ParseDuration(v); err != nil {
				reply(w, nil, fmt.Errorf("%w: window %q is not a duration", errs.BadRequest, v))
				return
			}
			if err := counters.CheckWindow(window); err != nil {
				reply(w, nil, fmt.Errorf("%w: window %w", errs.BadRequest, err))
				return
			}
		}
		inst, err := s.d.resolveOne(ref)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if inst.live == nil {
			reply(w, nil, fmt.Errorf("%w: program %q (id %d) is not loaded", errs.BadRequest, ref, inst.rec.ID))
			return
		}
		t, err := s.d.Counters.Enable(r.Context(), enable, inst.rec.Key, inst.rec.Name, window)
		reply(w, t, err)
	}
}

func (s *server) countersHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ref, since, until, err := progRange(q, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	h, err := s.d.counterHistory(ref, since, until)
	reply(w, h, err)
}

// counterHistory lists the finished windows of every instance PROG names,
// oldest first: for each pair of consecutive samples that counted runs,
// the per-run figures of what happened between them.
func (d *daemon) counterHistory(ref string, since, until time.Time) (api.CounterHistory, error) {
	if !until.After(since) {
		return api.CounterHistory{}, fmt.Errorf("%w: until (%s) must be after since (%s)", errs.BadRequest, until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	insts, err := d.resolve(ref)
	if err != nil {
		return api.CounterHistory{}, err
	}
	h := api.CounterHistory{Program: ref, Since: since, Until: until, Points: []api.CounterHistoryPoint{}}
	for _, inst := range insts {
		samples, err := d.Store.CounterSeries(inst.rec.Key, since, until)
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
				h.Points = append(h.Points, api.CounterHistoryPoint{ID: inst.rec.ID, PerfCounters: *p})
			}
			if len(h.Points) > maxHistoryPoints {
				return api.CounterHistory{}, fmt.Errorf("%w: more than %d windows; use a shorter range", errs.BadRequest, maxHistoryPoints)
			}
		}
	}
	sort.SliceStable(h.Points, func(i, j int) bool { return h.Points[i].WindowEnd.Before(h.Points[j].WindowEnd) })
	return h, nil
}
