package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/bpfperf/bpfperf/bench"
)

// StoreBenchRun hands a report (the JSON bench.WriteJSON writes) to the
// daemon, which keeps it with the history. label names it in listings;
// empty lets the daemon describe the run's configuration.
func (c *Client) StoreBenchRun(report []byte, label string) (BenchRun, error) {
	var run BenchRun
	var q url.Values
	if label != "" {
		q = url.Values{"label": {label}}
	}
	body, _, err := c.call(request{method: http.MethodPost, path: "bench/runs", query: q, body: bytes.NewReader(report)}, http.StatusCreated, maxBenchAnswer)
	if err != nil {
		return run, err
	}
	return run, json.Unmarshal(body, &run)
}

// BenchRuns lists the stored runs that started between since and until.
func (c *Client) BenchRuns(since, until time.Time) (BenchRuns, error) {
	var runs BenchRuns
	return runs, c.get("bench/runs", timeRange(since, until), &runs)
}

// BenchReport returns a stored run's report and its id. ref is a run id,
// "last" (the newest run) or "last~N" (N runs before the newest).
func (c *Client) BenchReport(ref string) (*bench.Report, uint64, error) {
	body, h, err := c.call(request{method: http.MethodGet, path: "bench/runs/" + url.PathEscape(ref)}, http.StatusOK, maxBenchAnswer)
	if err != nil {
		return nil, 0, err
	}
	var id uint64
	fmt.Sscan(h.Get(HeaderBenchRun), &id)
	rep, err := bench.ReadJSON(bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("stored bench run %s: %w", ref, err)
	}
	return rep, id, nil
}
