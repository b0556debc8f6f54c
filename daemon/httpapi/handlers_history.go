package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// history answers GET /v1/history: one program's points between since
// (default an hour back) and until, one per ?step.
func (s *server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ref, since, until, err := progRange(q, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	var step time.Duration
	if v := q.Get("step"); v != "" {
		if step, err = time.ParseDuration(v); err != nil || step <= 0 {
			reply(w, nil, fmt.Errorf("%w: step %q is not a positive duration", errs.BadRequest, v))
			return
		}
	}
	h, err := s.d.Query.History(ref, since, until, step)
	reply(w, h, err)
}
