package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/query"
	"github.com/bpfperf/bpfperf/store"
)

// Benchmark runs handed over by `bpfperf bench --store` (issue 6).

const (
	maxBenchLabel = 200
	// DefaultBenchSince is how far back a listing looks by default.
	DefaultBenchSince = 30 * 24 * time.Hour
)

// benchReply is reply, except that a report over the limit is 413.
func benchReply(w http.ResponseWriter, v any, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		replyError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: report is larger than %d MiB", errs.BadRequest, api.MaxBenchReport>>20))
		return
	}
	reply(w, v, err)
}

// putBenchRun stores a report (the JSON `bpfperf bench -o json` writes) and
// answers with the stored run. ?label= names it in listings.
func (s *server) putBenchRun(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBenchReport))
	if err != nil {
		benchReply(w, nil, err)
		return
	}
	run, err := benchRunOf(body, r.URL.Query().Get("label"), s.d.now())
	if err != nil {
		benchReply(w, nil, err)
		return
	}
	run, err = s.d.Store.PutBenchRun(run, body)
	if err != nil {
		benchReply(w, nil, err)
		return
	}
	w.Header().Set("Location", "/v1/bench/runs/"+strconv.FormatUint(run.ID, 10))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(run)
}

// benchRunOf checks that body is one bench report with results and says
// what a listing shows of it.
func benchRunOf(body []byte, label string, now time.Time) (store.BenchRun, error) {
	var run store.BenchRun
	dec := json.NewDecoder(bytes.NewReader(body))
	var rep bench.Report
	if err := dec.Decode(&rep); err != nil {
		if where := typeMismatch(body, reflect.TypeFor[bench.Report]()); where != nil {
			return run, fmt.Errorf("%w: bench report: %w", errs.BadRequest, where)
		}
		return run, fmt.Errorf("%w: not a bench report (the JSON of bpfperf bench -o json)", errs.BadRequest)
	}
	if _, err := dec.Token(); err != io.EOF {
		return run, fmt.Errorf("%w: not a bench report: data after the JSON document", errs.BadRequest)
	}
	if len(rep.Results) == 0 {
		return run, fmt.Errorf("%w: bench report has no results", errs.BadRequest)
	}
	for i, res := range rep.Results {
		if res.Name == "" {
			return run, fmt.Errorf("%w: bench report: result %d has no test name", errs.BadRequest, i)
		}
	}
	if rep.Time.IsZero() || rep.Time.Year() < 2000 || rep.Time.After(now.Add(time.Hour)) {
		return run, fmt.Errorf("%w: bench report time %q is missing or out of range", errs.BadRequest, rep.Time.Format(time.RFC3339))
	}
	for i, res := range rep.Results {
		if err := checkMeasurements(res); err != nil {
			return run, fmt.Errorf("%w: bench report: results[%d] (%s): %w", errs.BadRequest, i, res.Name, err)
		}
	}
	if len(label) > maxBenchLabel || strings.IndexFunc(label, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return run, fmt.Errorf("%w: label must be printable and at most %d bytes", errs.BadRequest, maxBenchLabel)
	}
	if label == "" {
		label = defaultBenchLabel(rep.Config)
	}
	run = store.BenchRun{Time: rep.Time, Stored: now, Tests: len(rep.Results), Kernel: rep.Fingerprint.Kernel, Commit: rep.Fingerprint.Commit, Label: label}
	for _, res := range rep.Results {
		if res.Error != "" {
			run.Failed++
		}
	}
	return run, nil
}

// maxRunNs bounds one measured run: a run of more than a day is not a
// measurement but a broken report (and sums of such overflow).
const maxRunNs = 86400e9

// checkMeasurements refuses a result that ran but measured nothing, or
// whose figures are negative or out of range, before it is stored: compare
// would refuse it later, when the report is gone.
func checkMeasurements(res bench.Result) error {
	if res.Skipped != "" || res.Error != "" {
		return nil
	}
	if len(res.Measurements()) == 0 {
		return errors.New("no measurements (a result that ran has at least one)")
	}
	inRange := func(x float64) bool { return x >= 0 && x <= maxRunNs }
	for j, run := range res.Runs {
		for k, x := range run.Measurements {
			if !inRange(x) {
				return fmt.Errorf("runs[%d].measurements_ns[%d] is %g: want 0 to %g ns", j, k, x, float64(maxRunNs))
			}
		}
	}
	s := res.Summary
	for name, x := range map[string]float64{"median_ns": s.Median, "mean_ns": s.Mean, "min_ns": s.Min, "max_ns": s.Max, "iqr_ns": s.IQR, "stddev_ns": s.Stddev} {
		if !inRange(x) {
			return fmt.Errorf("summary.%s is %g: want 0 to %g ns", name, x, float64(maxRunNs))
		}
	}
	return nil
}

// defaultBenchLabel says what ran: "quick filter=^maps/".
func defaultBenchLabel(c bench.ReportConfig) string {
	var parts []string
	if c.Quick {
		parts = append(parts, "quick")
	}
	if c.Filter != "" {
		parts = append(parts, "filter="+c.Filter)
	}
	if c.WithStats {
		parts = append(parts, "with-stats")
	}
	if len(parts) == 0 {
		return "full"
	}
	return strings.Join(parts, " ")
}

func (s *server) listBenchRuns(w http.ResponseWriter, r *http.Request) {
	since, until, err := queryRange(r.URL.Query(), DefaultBenchSince, s.d.now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	runs, err := s.d.Store.ListBenchRuns(since, until)
	reply(w, api.BenchRuns{Since: since, Until: until, Runs: query.NonNil(runs)}, err)
}

// getBenchRun answers with the report as it was stored. {id} is a run id,
// "last" (the newest run) or "last~N" (N runs before it).
func (s *server) getBenchRun(w http.ResponseWriter, r *http.Request) {
	id, err := s.d.benchRunID(r.PathValue("id"))
	if err != nil {
		benchReply(w, nil, err)
		return
	}
	run, report, err := s.d.Store.GetBenchRun(id)
	if errors.Is(err, errs.UnknownBenchRun) {
		err = fmt.Errorf("%w (bpfperf bench runs lists the stored runs)", err)
	}
	if err != nil {
		benchReply(w, nil, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(api.HeaderBenchRun, strconv.FormatUint(run.ID, 10))
	w.Write(report)
}

// benchRunID resolves a run reference to an id.
func (d *daemon) benchRunID(ref string) (uint64, error) {
	back, isLast, err := parseLast(ref)
	if err != nil {
		return 0, err
	}
	if !isLast {
		id, err := strconv.ParseUint(ref, 10, 64)
		if err != nil || id == 0 {
			return 0, fmt.Errorf("%w %q: want a run id (bpfperf bench runs lists them), last or last~N", errs.BadRequest, ref)
		}
		return id, nil
	}
	runs, err := d.Store.ListBenchRuns(time.Time{}, time.Unix(0, math.MaxInt64))
	if err != nil {
		return 0, err
	}
	if back >= len(runs) {
		return 0, fmt.Errorf("%w %q: %d runs are stored", errs.UnknownBenchRun, ref, len(runs))
	}
	return runs[len(runs)-1-back].ID, nil
}

// parseLast reads "last" (0) and "last~N" (N).
func parseLast(ref string) (back int, ok bool, err error) {
	rest, ok := strings.CutPrefix(ref, "last")
	if !ok {
		return 0, false, nil
	}
	if rest == "" {
		return 0, true, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, "~"))
	if !strings.HasPrefix(rest, "~") || err != nil || n < 0 {
		return 0, true, fmt.Errorf("%w %q: want last or last~N", errs.BadRequest, ref)
	}
	return n, true, nil
}
