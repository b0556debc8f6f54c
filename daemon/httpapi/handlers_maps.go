package httpapi

import (
	"net/http"
	"time"
)

// maps answers GET /v1/maps: every map of the last reading, with
// ?all=true the gone ones the store still has too; by memory, largest
// first.
func (s *server) maps(w http.ResponseWriter, r *http.Request) {
	all, err := boolParam(r, "all")
	if err != nil {
		reply(w, nil, err)
		return
	}
	out, err := s.d.Query.MapsView(all)
	reply(w, out, err)
}

// mapDetail answers GET /v1/maps/{map}: one map (an id, or a name when
// unique) and its readings between since and until (default: an hour).
func (s *server) mapDetail(w http.ResponseWriter, r *http.Request) {
	since, until, err := queryRange(r.URL.Query(), time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	d, err := s.d.Query.MapDetail(r.PathValue("map"), since, until)
	reply(w, d, err)
}
