package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/profile"
)

// listRegressions answers GET /v1/regressions?since&until&prog.
func (s *server) listRegressions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, 7*24*time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	list, err := s.d.Query.Findings(since, until, q.Get("prog"))
	reply(w, api.Regressions{Since: since, Until: until, Regressions: list}, err)
}

func (s *server) getRegression(w http.ResponseWriter, r *http.Request) {
	reg, err := s.d.Query.Finding(r.PathValue("id"))
	reply(w, reg, err)
}

// regressionDiff answers the pprof diff of a finding's windows: the after
// window's merged profiles minus the before window's (positive = grew).
func (s *server) regressionDiff(w http.ResponseWriter, r *http.Request) {
	reg, err := s.d.Query.Finding(r.PathValue("id"))
	if err != nil {
		reply(w, nil, err)
		return
	}
	before, _, err := profiling.MergeWindows(s.d.Store, reg.BeforeFrom, reg.BeforeTo)
	if err != nil {
		reply(w, nil, fmt.Errorf("before window: %w", err))
		return
	}
	after, _, err := profiling.MergeWindows(s.d.Store, reg.AfterFrom, reg.AfterTo)
	if err != nil {
		reply(w, nil, fmt.Errorf("after window: %w", err))
		return
	}
	diff, err := profile.Diff(before, after)
	if err != nil {
		reply(w, nil, err)
		return
	}
	data, err := profile.Marshal(diff)
	if err != nil {
		reply(w, nil, err)
		return
	}
	writeProfile(w, data)
}
