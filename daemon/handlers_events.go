package daemon

import (
	"net/http"
	"strconv"
	"strings"
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
	// prog narrows to one program's events: an id, a name or name@tag,
	// one the store knows (404 otherwise, as history).
	if ref := q.Get("prog"); ref != "" {
		if _, err := s.d.resolve(ref); err != nil {
			reply(w, nil, err)
			return
		}
	}
	events, err := s.d.store.Events(since, until)
	if ref := q.Get("prog"); ref != "" && err == nil {
		name, tag, hasTag := strings.Cut(ref, "@")
		id, idErr := strconv.ParseUint(ref, 10, 32)
		kept := events[:0]
		for _, e := range events {
			if (idErr == nil && e.ID == uint32(id)) || (idErr != nil && e.Name == name && (!hasTag || e.Tag == tag)) {
				kept = append(kept, e)
			}
		}
		events = kept
	}
	reply(w, api.Events{Since: since, Until: until, Events: apiEvents(events)}, err)
}
