package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
)

// server answers the /v1 API from the sampler's view and the store.
type server struct {
	d *daemon
}

// route is one endpoint: its pattern, the query parameters it takes, and
// its handler. A parameter a route does not take is refused, not ignored:
// `sinse=1d` would otherwise silently give the default range.
type route struct {
	pattern string
	params  []string
	handler http.HandlerFunc
}

// apiRoutes is every /v1 route, in one table.
func (s *server) apiRoutes() []route {
	return []route{
		{"GET /v1/status", nil, s.status},
		{"POST /v1/stats-cost/measure", nil, s.measureStatsCost},
		{"GET /v1/progs", []string{"all", "fields"}, s.progs},
		{"GET /v1/progs/{prog}", nil, s.show},
		{"GET /v1/history", []string{"prog", "since", "until", "step"}, s.history},
		{"GET /v1/events", []string{"prog", "since", "until"}, s.events},
		{"GET /v1/maps", []string{"all"}, s.maps},
		{"GET /v1/maps/{map}", []string{"since", "until"}, s.mapDetail},
		{"GET /v1/owners", []string{"since", "until", "owner"}, s.owners},
		{"GET /v1/triggers", []string{"prog", "workload", "since", "until"}, s.triggers},
		{"GET /v1/hooks", []string{"prog", "since", "until"}, s.hooks},
		{"GET /v1/store/stats", nil, s.storeStats},
		{"GET /v1/store/check", nil, s.storeCheck},
		{"GET /v1/export", []string{"since", "until", "format"}, s.export},
		// Profiles: the GETs only read the store; the POST starts a
		// bounded capture.
		{"GET /v1/profiles", []string{"since", "until", "kind"}, s.listProfiles},
		{"GET /v1/profiles/merge", []string{"since", "until", "kind"}, s.mergeProfiles},
		{"GET /v1/profiles/{id}", nil, s.getProfile},
		{"POST /v1/profiles/capture", []string{"duration", "event"}, s.captureProfile},
		{"POST /v1/bench/runs", []string{"label"}, s.putBenchRun},
		{"GET /v1/bench/runs", []string{"since", "until"}, s.listBenchRuns},
		{"GET /v1/bench/runs/{id}", nil, s.getBenchRun},
		{"GET /v1/bench/compare", []string{"base", "new", "min_delta"}, s.compareBenchRuns},
		{"GET /v1/counters", nil, s.countersList},
		{"POST /v1/counters/enable", []string{"prog", "window"}, s.countersEnable(true)},
		{"POST /v1/counters/disable", []string{"prog"}, s.countersEnable(false)},
		{"GET /v1/counters/history", []string{"prog", "since", "until"}, s.countersHistory},
		{"POST /v1/latency", []string{"prog", "duration"}, s.latencyWindow},
		{"GET /v1/latency/history", []string{"prog", "since", "until"}, s.latencyHistory},
		{"GET /v1/regressions", []string{"since", "until", "prog"}, s.listRegressions},
		{"GET /v1/regressions/{id}", nil, s.getRegression},
		{"GET /v1/regressions/{id}/diff", nil, s.regressionDiff},
		{"GET /v1/check", []string{"prog", "baseline", "max", "since", "until"}, s.check},
	}
}

// routes answers the /v1 API.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	return strict(mux, register(mux, s.apiRoutes()))
}

// register adds routes to mux and returns the parameters each takes, by
// pattern, for strict.
func register(mux *http.ServeMux, routes []route) map[string][]string {
	params := make(map[string][]string, len(routes))
	for _, r := range routes {
		mux.HandleFunc(r.pattern, r.handler)
		params[r.pattern] = r.params
	}
	return params
}

// reply answers v as JSON, or err as the API's error body with the status
// its kind calls for (statusOf).
func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		replyError(w, statusOf(err), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// replyError answers err with status code.
func replyError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(api.ErrorAnswer{Error: err.Error()})
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not a boolean", errs.BadRequest, name, v)
	}
	return b, nil
}

// timeParam parses RFC 3339 or a duration back from now ("1h").
func timeParam(v string, def, now time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	return api.ParseTime(v, now)
}

// queryRange reads the since and until parameters (default: back from now
// and now) and checks that they make a range.
func queryRange(q url.Values, back time.Duration, now time.Time) (since, until time.Time, err error) {
	if since, err = timeParam(q.Get("since"), now.Add(-back), now); err != nil {
		return since, until, fmt.Errorf("%w: since: %w", errs.BadRequest, err)
	}
	if until, err = timeParam(q.Get("until"), now, now); err != nil {
		return since, until, fmt.Errorf("%w: until: %w", errs.BadRequest, err)
	}
	if !until.After(since) {
		return since, until, fmt.Errorf("%w: until must be after since", errs.BadRequest)
	}
	return since, until, nil
}

// progParam reads the prog parameter a per-program query needs.
func progParam(q url.Values) (string, error) {
	ref := q.Get("prog")
	if ref == "" {
		return "", fmt.Errorf("%w: prog is required", errs.BadRequest)
	}
	return ref, nil
}

// progRange reads prog and the since and until of a per-program query
// (default: an hour back from now, and now).
func progRange(q url.Values, now time.Time) (ref string, since, until time.Time, err error) {
	if ref, err = progParam(q); err != nil {
		return "", since, until, err
	}
	since, until, err = queryRange(q, time.Hour, now)
	return ref, since, until, err
}
