package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
)

// check answers GET /v1/check?prog=NAME&max=10%&baseline=TAG|TIME&since=D:
// is the program's current version slower than the baseline by more than
// max? (query.Check says what each baseline compares.)
func (s *server) check(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := s.d.now()
	since, until, err := queryRange(q, 7*24*time.Hour, now)
	if err != nil {
		reply(w, nil, err)
		return
	}
	limit, err := api.ParsePercent(q.Get("max"))
	if err != nil {
		reply(w, nil, fmt.Errorf("%w: max: %w", errs.BadRequest, err))
		return
	}
	res, err := s.d.Query.Check(q.Get("prog"), q.Get("baseline"), limit, since, until)
	reply(w, res, err)
}
