package httpapi

import (
	"net/http"

	"github.com/bpfperf/bpfperf/daemon/latency"
)

// latencyWindow opens a latency window on a loaded program and answers
// when it ends: POST /v1/latency?prog=&duration= (default 10s).
func (s *server) latencyWindow(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d, err := durationParam(q, "duration", latency.DefaultWindow, latency.CheckWindow)
	if err != nil {
		reply(w, nil, err)
		return
	}
	inst, err := s.liveProgram(q)
	if err != nil {
		reply(w, nil, err)
		return
	}
	win, err := s.d.Latency.Time(r.Context(), inst.Rec.Key, inst.Rec.Name, d)
	reply(w, win, err)
}

// latencyHistory answers a program's stored latency windows:
// GET /v1/latency/history?prog=&since=&until=.
func (s *server) latencyHistory(w http.ResponseWriter, r *http.Request) {
	ref, since, until, err := progRange(r.URL.Query(), s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	h, err := s.d.Query.LatencyHistory(ref, since, until)
	reply(w, h, err)
}
