package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/query"
)

func (s *server) countersList(w http.ResponseWriter, r *http.Request) {
	reply(w, s.d.Counters.List(), nil)
}

func (s *server) countersEnable(enable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		window, err := durationParam(q, "window", 0, counters.CheckWindow)
		if err != nil {
			reply(w, nil, err)
			return
		}
		inst, err := s.liveProgram(q)
		if err != nil {
			reply(w, nil, err)
			return
		}
		t, err := s.d.Counters.Enable(r.Context(), enable, inst.Rec.Key, inst.Rec.Name, window)
		reply(w, t, err)
	}
}

// durationParam reads the duration parameter name, def when absent, and
// checks a given one.
func durationParam(q url.Values, name string, def time.Duration, check func(time.Duration) error) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a duration", errs.BadRequest, name, v)
	}
	if err := check(d); err != nil {
		return 0, fmt.Errorf("%w: %s %w", errs.BadRequest, name, err)
	}
	return d, nil
}

// liveProgram resolves the prog parameter to one loaded program: what a
// window opens on.
func (s *server) liveProgram(q url.Values) (query.Instance, error) {
	ref, err := progParam(q)
	if err != nil {
		return query.Instance{}, err
	}
	inst, err := s.d.Query.ResolveOne(ref)
	if err != nil {
		return inst, err
	}
	if inst.Live == nil {
		return inst, fmt.Errorf("%w: program %q (id %d) is not loaded", errs.BadRequest, ref, inst.Rec.ID)
	}
	return inst, nil
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
