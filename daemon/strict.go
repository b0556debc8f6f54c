package daemon

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// routeParams lists the query parameters each route takes. A parameter a
// route does not take is refused, not ignored: `sinse=1d` would otherwise
// silently give the default range.
var routeParams = map[string][]string{
	"GET /v1/status":                nil,
	"GET /v1/progs":                 {"all", "fields"},
	"GET /v1/progs/{prog}":          nil,
	"GET /v1/history":               {"prog", "since", "until", "step"},
	"GET /v1/events":                {"prog", "since", "until"},
	"GET /v1/store/stats":           nil,
	"GET /v1/store/check":           nil,
	"GET /v1/export":                {"since", "until", "format"},
	"POST /v1/bench/runs":           {"label"},
	"GET /v1/bench/runs":            {"since", "until"},
	"GET /v1/bench/runs/{id}":       nil,
	"GET /v1/bench/compare":         {"base", "new", "min_delta"},
	"GET /v1/maps":                  {"all"},
	"GET /v1/maps/{map}":            {"since", "until"},
	"GET /v1/owners":                {"since", "until", "owner"},
	"GET /v1/regressions":           {"since", "until", "prog"},
	"GET /v1/regressions/{id}":      nil,
	"GET /v1/regressions/{id}/diff": nil,
	"GET /v1/check":                 {"prog", "baseline", "max", "since", "until"},
	"GET /v1/counters":              nil,
	"POST /v1/counters/enable":      {"prog", "window"},
	"POST /v1/counters/disable":     {"prog"},
	"GET /v1/counters/history":      {"prog", "since", "until"},
	"GET /v1/profiles":              {"since", "until", "kind"},
	"GET /v1/profiles/merge":        {"since", "until", "kind"},
	"GET /v1/profiles/{id}":         nil,
	"POST /v1/profiles/capture":     {"duration", "event"},
	"GET /debug/pprof/profile":      {"seconds"},
	"GET /metrics":                  nil,
}

// strict answers what mux has no route for in the API's JSON error form
// (404, or 405 naming the methods the path takes), and refuses query
// parameters the matched route does not take with a 400 that lists the
// ones it does.
func strict(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		if pattern == "" {
			var allowed []string
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				probe := r.Clone(r.Context())
				probe.Method = m
				if _, p := mux.Handler(probe); p != "" {
					allowed = append(allowed, m)
				}
			}
			if len(allowed) > 0 {
				w.Header().Set("Allow", strings.Join(allowed, ", "))
				replyError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: method not allowed, use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
				return
			}
			replyError(w, http.StatusNotFound, fmt.Errorf("no such route: %s %s", r.Method, r.URL.Path))
			return
		}
		if takes, known := routeParams[pattern]; known {
			for name := range r.URL.Query() {
				if !slices.Contains(takes, name) {
					replyError(w, http.StatusBadRequest, unknownParam(r.URL.Path, name, takes))
					return
				}
			}
		}
		mux.ServeHTTP(w, r) // sets the path values mux.Handler does not
	})
}

func unknownParam(path, name string, takes []string) error {
	if len(takes) == 0 {
		return fmt.Errorf("%w: %s takes no query parameters, got %q", ErrBadRequest, path, name)
	}
	return fmt.Errorf("%w: %s does not take %q; it takes %s", ErrBadRequest, path, name, strings.Join(takes, ", "))
}
