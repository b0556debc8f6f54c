package httpapi

import (
	"net/http"
	"time"
)

// triggers answers GET /v1/triggers: what triggered each program (or the
// one prog names; only workload's rows where it is set) over the
// continuous profile windows in [since, until] (default: the last hour).
func (s *server) triggers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	out, err := s.d.Query.Triggers(q.Get("prog"), q.Get("workload"), since, until)
	reply(w, out, err)
}
