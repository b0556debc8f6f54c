package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Latency has the daemon time every run of prog (an id, a name when
// unique, name@tag or an identity) for d and returns the window when it
// ends; it waits d and the client's timeout.
func (c *Client) Latency(prog string, d time.Duration) (LatencyWindow, error) {
	var w LatencyWindow
	body, _, err := c.call(request{method: http.MethodPost, path: "latency", timeout: d + c.http.Timeout,
		query: url.Values{"prog": {prog}, "duration": {d.String()}}}, http.StatusOK, maxPostAnswer)
	if err != nil {
		return w, err
	}
	return w, json.Unmarshal(body, &w)
}

// LatencyHistory returns the stored latency windows of prog between since
// and until.
func (c *Client) LatencyHistory(prog string, since, until time.Time) (LatencyHistory, error) {
	q := timeRange(since, until)
	q.Set("prog", prog)
	var h LatencyHistory
	return h, c.get("latency/history", q, &h)
}
