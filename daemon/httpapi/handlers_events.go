package httpapi

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
	// an identity, one the store knows (404 otherwise, as history); its
	// identity's events (every version's) come with it.
	var insts []instance
	if ref := q.Get("prog"); ref != "" {
		if insts, err = s.d.resolve(ref); err == nil {
			insts, err = s.d.sameProgram(insts)
		}
		if err != nil {
			reply(w, nil, err)
			return
		}
	}
	events, err := s.d.Store.Events(since, until)
	if ref := q.Get("prog"); ref != "" && err == nil {
		name, tag, hasTag := strings.Cut(ref, "@")
		_, idErr := strconv.ParseUint(ref, 10, 32)
		idents, ids := map[string]bool{}, map[uint32]string{}
		for _, in := range insts {
			ids[in.rec.ID] = in.rec.Name
			if in.ident != "" {
				idents[in.ident] = true
			}
		}
		kept := events[:0]
		for _, e := range events {
			byName := idErr != nil && e.Name == name && (!hasTag || e.Tag == tag)
			byID := e.ID != 0 && ids[e.ID] == e.Name && e.Name != ""
			if byName || byID || (e.Identity != "" && idents[e.Identity]) {
				kept = append(kept, e)
			}
		}
		events = kept
	}
	reply(w, api.Events{Since: since, Until: until, Events: nonNil(events)}, err)
}
