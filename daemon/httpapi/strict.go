package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// strict answers what mux has no route for in the API's JSON error form
// (404, or 405 naming the methods the path takes), and refuses query
// parameters the matched route does not take (params, by pattern; a
// pattern not there is not checked) with a 400 that lists the ones it
// does.
func strict(mux *http.ServeMux, params map[string][]string) http.Handler {
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
		if takes, known := params[pattern]; known {
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
		return fmt.Errorf("%w: %s takes no query parameters, got %q", errs.BadRequest, path, name)
	}
	return fmt.Errorf("%w: %s does not take %q; it takes %s", errs.BadRequest, path, name, strings.Join(takes, ", "))
}
