package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// server answers the /v1 API from the sampler's view and the store.
type server struct {
	d *Daemon
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/progs", s.progs)
	mux.HandleFunc("GET /v1/progs/{prog}", s.show)
	mux.HandleFunc("GET /v1/history", s.history)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/maps", s.maps)
	mux.HandleFunc("GET /v1/maps/{map}", s.mapDetail)
	mux.HandleFunc("GET /v1/owners", s.owners)
	mux.HandleFunc("GET /v1/store/stats", s.storeStats)
	mux.HandleFunc("GET /v1/store/check", s.storeCheck)
	mux.HandleFunc("GET /v1/export", s.export)
	s.profileRoutes(mux)
	s.benchRoutes(mux)
	s.counterRoutes(mux)
	s.regressionRoutes(mux)
	return strict(mux)
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
		return false, fmt.Errorf("%w: %s=%q is not a boolean", ErrBadRequest, name, v)
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
		return since, until, fmt.Errorf("%w: since: %w", ErrBadRequest, err)
	}
	if until, err = timeParam(q.Get("until"), now, now); err != nil {
		return since, until, fmt.Errorf("%w: until: %w", ErrBadRequest, err)
	}
	if !until.After(since) {
		return since, until, fmt.Errorf("%w: until must be after since", ErrBadRequest)
	}
	return since, until, nil
}

// progParam reads the prog parameter a per-program query needs.
func progParam(q url.Values) (string, error) {
	ref := q.Get("prog")
	if ref == "" {
		return "", fmt.Errorf("%w: prog is required", ErrBadRequest)
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
