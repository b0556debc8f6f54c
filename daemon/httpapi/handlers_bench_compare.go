package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/daemon/errs"
)

// compareBenchRuns answers GET /v1/bench/compare?base=REF&new=REF: what
// `bpfperf bench compare BASE NEW` prints for two stored runs (medians,
// 95% intervals, a Mann-Whitney U test; bench.CompareMin, the CLI's own),
// so the dashboard shows the same significance without a second
// implementation. ?min_delta= is the CLI's --min-delta.
func (s *server) compareBenchRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	minPct := float64(bench.DefaultMinDeltaPct)
	if v := q.Get("min_delta"); v != "" {
		var err error
		if minPct, err = strconv.ParseFloat(v, 64); err != nil || minPct < 0 {
			reply(w, nil, fmt.Errorf("%w: min_delta %q is not a percentage of 0 or more", errs.BadRequest, v))
			return
		}
	}
	var samples [2]bench.Samples
	for i, name := range []string{"base", "new"} {
		ref := q.Get(name)
		if ref == "" {
			reply(w, nil, fmt.Errorf("%w: %s is required (a run id, last or last~N)", errs.BadRequest, name))
			return
		}
		rep, err := s.d.benchReport(ref)
		if err != nil {
			benchReply(w, nil, fmt.Errorf("%s: %w", name, err))
			return
		}
		samples[i] = bench.SamplesOf(rep)
	}
	cmp := bench.CompareMin(samples[0], samples[1], minPct)
	if len(cmp.Deltas) == 0 {
		reply(w, nil, fmt.Errorf("%w: the runs have no test in common", errs.BadRequest))
		return
	}
	reply(w, cmp, nil)
}

// benchReport reads the stored report a run reference names.
func (d *daemon) benchReport(ref string) (*bench.Report, error) {
	id, err := d.benchRunID(ref)
	if err != nil {
		return nil, err
	}
	_, data, err := d.Store.GetBenchRun(id)
	if errors.Is(err, errs.UnknownBenchRun) {
		err = fmt.Errorf("%w (bpfperf bench runs lists the stored runs)", err)
	}
	if err != nil {
		return nil, err
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("stored run %d: %w", id, err)
	}
	return &rep, nil
}
