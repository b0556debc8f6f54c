package httpapi

import (
	"net/http"
	"time"
)

// hooks answers GET /v1/hooks: what each hook's machinery cost (only
// those prog is attached to, where set) over the continuous profile
// windows in [since, until] (default: the last hour).
func (s *server) hooks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	out, err := s.d.Query.Hooks(q.Get("prog"), since, until)
	reply(w, out, err)
}
