package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/store"
)

// StoreBenchRun hands a report (the JSON bench.WriteJSON writes) to the
// daemon, which keeps it with the history. label names it in listings;
// empty lets the daemon describe the run's configuration.
func (c *Client) StoreBenchRun(report []byte, label string) (store.BenchRun, error) {
	var run store.BenchRun
	u := "http://bpfperfd/v1/bench/runs"
	if label != "" {
		u += "?" + url.Values{"label": {label}}.Encode()
	}
	resp, err := c.http.Post(u, "application/json", bytes.NewReader(report))
	if err != nil {
		return run, fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer resp.Body.Close()
	body, err := readAnswer(resp, http.StatusCreated, MaxBenchReport+1<<20)
	if err != nil {
		return run, err
	}
	return run, json.Unmarshal(body, &run)
}

// BenchRuns lists the stored runs that started between since and until.
func (c *Client) BenchRuns(since, until time.Time) (BenchRuns, error) {
	q := url.Values{"since": {since.Format(time.RFC3339Nano)}, "until": {until.Format(time.RFC3339Nano)}}
	var runs BenchRuns
	return runs, c.get("bench/runs", q, &runs)
}

// BenchReport returns a stored run's report and its id. ref is a run id,
// "last" (the newest run) or "last~N" (N runs before the newest).
func (c *Client) BenchReport(ref string) (*bench.Report, uint64, error) {
	resp, err := c.http.Get("http://bpfperfd/v1/bench/runs/" + url.PathEscape(ref))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer resp.Body.Close()
	body, err := readAnswer(resp, http.StatusOK, MaxBenchReport+1<<20)
	if err != nil {
		return nil, 0, err
	}
	var id uint64
	fmt.Sscan(resp.Header.Get(benchRunIDHeader), &id)
	rep, err := bench.ReadJSON(bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("stored bench run %s: %w", ref, err)
	}
	return rep, id, nil
}
