package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/profile"
)

// isFinding says whether an event kind is one of regression detection's.
func isFinding(kind string) bool {
	return kind == regress.KindRegression || kind == regress.KindImprovement || kind == regress.KindShift
}

// findings returns the stored findings in [since, until], of one program
// name when prog is set.
func (d *daemon) findings(since, until time.Time, prog string) ([]api.Regression, error) {
	events, err := d.Store.Events(since, until)
	if err != nil {
		return nil, err
	}
	out := []api.Regression{}
	for _, e := range events {
		if !isFinding(e.Kind) || (prog != "" && e.Name != prog) || len(e.Evidence) == 0 {
			continue
		}
		var r api.Regression
		if err := json.Unmarshal(e.Evidence, &r); err != nil {
			return nil, fmt.Errorf("stored %s event of %s: %w", e.Kind, e.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// listRegressions answers GET /v1/regressions?since&until&prog.
func (s *server) listRegressions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, 7*24*time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	// prog is a program name the store knows (404 otherwise, as history);
	// a name many versions share is what findings are about.
	if ref := q.Get("prog"); ref != "" {
		if _, err := s.d.resolve(ref); errors.Is(err, errs.UnknownProgram) {
			reply(w, nil, err)
			return
		}
	}
	list, err := s.d.findings(since, until, q.Get("prog"))
	reply(w, api.Regressions{Since: since, Until: until, Regressions: list}, err)
}

// regression finds a stored finding by id, over the whole history.
func (d *daemon) regression(id string) (api.Regression, error) {
	list, err := d.findings(time.Unix(0, 0), d.now().Add(time.Hour), "")
	if err != nil {
		return api.Regression{}, err
	}
	for _, r := range list {
		if r.ID == id {
			return r, nil
		}
	}
	return api.Regression{}, fmt.Errorf("%w: %q", errs.UnknownRegression, id)
}

func (s *server) getRegression(w http.ResponseWriter, r *http.Request) {
	reg, err := s.d.regression(r.PathValue("id"))
	reply(w, reg, err)
}

// regressionDiff answers the pprof diff of a finding's windows: the after
// window's merged profiles minus the before window's (positive = grew).
func (s *server) regressionDiff(w http.ResponseWriter, r *http.Request) {
	reg, err := s.d.regression(r.PathValue("id"))
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
