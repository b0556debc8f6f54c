package httpapi

import (
	"fmt"
	"net/http"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// progs answers GET /v1/progs: the loaded programs, with ?all=true every
// stored instance too, with ?fields=counters only their counters.
func (s *server) progs(w http.ResponseWriter, r *http.Request) {
	all, err := boolParam(r, "all")
	if err != nil {
		reply(w, nil, err)
		return
	}
	switch f := r.URL.Query().Get("fields"); f {
	case "":
	case "counters":
		if all {
			reply(w, nil, fmt.Errorf("%w: fields=counters lists loaded programs only", errs.BadRequest))
			return
		}
		reply(w, s.d.Query.ProgCounters(), nil)
		return
	default:
		reply(w, nil, fmt.Errorf("%w: fields=%q: want counters or nothing", errs.BadRequest, f))
		return
	}
	rows, err := s.d.Query.Rows(all)
	reply(w, rows, err)
}

// show answers GET /v1/progs/{prog}: one program's row and metadata.
func (s *server) show(w http.ResponseWriter, r *http.Request) {
	inst, err := s.d.Query.ResolveOne(r.PathValue("prog"))
	if err != nil {
		reply(w, nil, err)
		return
	}
	detail, err := s.d.Query.Detail(inst)
	reply(w, detail, err)
}
