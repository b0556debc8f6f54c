package httpapi

import (
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/query"
)

// owners answers GET /v1/owners: what each owner costs now, or with since
// (and until) over that window; with owner, only the owners it names.
func (s *server) owners(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var out api.Owners
	if q.Get("since") == "" && q.Get("until") == "" {
		out.Owners = s.d.Query.OwnersLive()
	} else {
		since, until, err := queryRange(q, time.Hour, s.d.now())
		if err != nil {
			reply(w, nil, err)
			return
		}
		out.Since, out.Until = since, until
		if out.Owners, err = s.d.Query.OwnersOver(since, until); err != nil {
			reply(w, nil, err)
			return
		}
	}
	if ref := q.Get("owner"); ref != "" {
		var err error
		if out.Owners, err = query.OnlyOwner(out.Owners, ref); err != nil {
			reply(w, nil, err)
			return
		}
	}
	reply(w, out, nil)
}
