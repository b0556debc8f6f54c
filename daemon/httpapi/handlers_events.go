package httpapi

import (
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// events answers GET /v1/events: the stored events between since (default
// a day back) and until, of one program with ?prog=.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, 24*time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	events, err := s.d.Query.Events(since, until, q.Get("prog"))
	reply(w, api.Events{Since: since, Until: until, Events: events}, err)
}
