package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/profile"
)

// pprofProfile answers GET /debug/pprof/profile?seconds=N on the TCP
// listener the way Go's net/http/pprof does, so Parca (process_cpu,
// delta: true) and Grafana Alloy's pyroscope.scrape read it: a gzipped
// pprof of the BPF CPU time of the next N seconds (default 30, capped by
// --profile.limit), symbolized like every other profile. It is cut out of
// the continuous sampler's samples (profile.Profiler.Scrape), so any
// number of scrapes share the perf events the daemon already holds; with
// continuous profiling off it is an on-demand capture, one at a time (409
// otherwise). The profile is not stored: the scraper keeps it, and the
// continuous windows cover the same time.
func (s *server) pprofProfile(w http.ResponseWriter, r *http.Request) {
	prof, err := s.d.Profiling.Profiler()
	if err != nil {
		reply(w, nil, err)
		return
	}
	limit := prof.MaxDuration()
	dur := min(defaultPprofSeconds*time.Second, limit)
	if v := r.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > int64(limit/time.Second) {
			reply(w, nil, fmt.Errorf("%w: seconds=%q: want a whole number of seconds from 1 to %d (the daemon's --profile.limit)", errs.BadRequest, v, limit/time.Second))
			return
		}
		dur = time.Duration(n) * time.Second
	}
	p, err := prof.Scrape(r.Context(), dur)
	if errors.Is(err, profile.ErrBusy) {
		reply(w, nil, fmt.Errorf("%w: continuous profiling is off, and an on-demand capture runs one at a time; try again when it ends", profile.ErrBusy))
		return
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	data, err := profile.Marshal(p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	writeProfile(w, data)
}
