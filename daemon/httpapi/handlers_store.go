package httpapi

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/query"
	"github.com/bpfperf/bpfperf/store"
)

// storeStats answers GET /v1/store/stats.
func (s *server) storeStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.d.Store.Stats()
	reply(w, st, err)
}

// storeCheck answers GET /v1/store/check: it reads the whole store.
func (s *server) storeCheck(w http.ResponseWriter, r *http.Request) {
	problems, err := s.d.Store.Check()
	if problems == nil {
		problems = []string{}
	}
	reply(w, api.StoreCheck{OK: len(problems) == 0, Problems: problems}, err)
}

// export streams raw samples as CSV or JSON lines, flushing as it goes, so
// neither side holds more than one program's window in memory.
func (s *server) export(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, 24*time.Hour, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	format := q.Get("format")
	if format != "csv" && format != "jsonl" {
		reply(w, nil, fmt.Errorf("%w: format %q: want csv or jsonl", errs.BadRequest, format))
		return
	}
	// An error after the first bytes cannot change the status: it goes in
	// a trailer the client checks.
	w.Header().Set("Trailer", api.TrailerExportError)
	flusher, _ := w.(http.Flusher)
	n := 0
	flush := func() {
		if n++; n%1000 == 0 && flusher != nil {
			flusher.Flush()
		}
	}
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv")
		cw := csv.NewWriter(w)
		cw.Write(api.ExportFields)
		err = s.d.Store.Export(since, until, func(row store.ExportRow) error {
			p, c := row.Program, query.PointCounters(row.Point)
			cw.Write([]string{row.Point.Time.UTC().Format(time.RFC3339Nano), p.BootID, strconv.FormatUint(uint64(p.ID), 10), p.Name, p.Type, p.Tag,
				strconv.FormatUint(c.RunCnt, 10), strconv.FormatUint(c.RunTimeNs, 10), strconv.FormatUint(c.RecursionMisses, 10)})
			flush()
			return cw.Error()
		})
		cw.Flush()
	} else {
		w.Header().Set("Content-Type", "application/jsonl")
		enc := json.NewEncoder(w)
		err = s.d.Store.Export(since, until, func(row store.ExportRow) error {
			p := row.Program
			flush()
			return enc.Encode(api.ExportRecord{Time: row.Point.Time, BootID: p.BootID, ID: p.ID, Name: p.Name, Type: p.Type, Tag: p.Tag,
				Counters: query.PointCounters(row.Point)})
		})
	}
	if err != nil {
		w.Header().Set(api.TrailerExportError, err.Error())
	}
}
