package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/errs"
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
		inst, err := s.d.Query.ResolveOne(ref)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if inst.Live == nil {
			reply(w, nil, fmt.Errorf("%w: program %q (id %d) is not loaded", errs.BadRequest, ref, inst.Rec.ID))
			return
		}
		t, err := s.d.Counters.Enable(r.Context(), enable, inst.Rec.Key, inst.Rec.Name, window)
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
	h, err := s.d.Query.CounterHistory(ref, since, until)
	reply(w, h, err)
}
