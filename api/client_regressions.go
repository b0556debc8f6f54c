package api

import (
	"net/http"
	"net/url"
	"time"
)

// Regressions lists the findings of [since, until], of one program name
// when prog is set.
func (c *Client) Regressions(since, until time.Time, prog string) (Regressions, error) {
	q := timeRange(since, until)
	if prog != "" {
		q.Set("prog", prog)
	}
	var r Regressions
	return r, c.get("regressions", q, &r)
}

// Regression returns one finding by id.
func (c *Client) Regression(id string) (Regression, error) {
	var r Regression
	return r, c.get("regressions/"+url.PathEscape(id), nil, &r)
}

// RegressionDiff returns a finding's profile diff as gzipped pprof.
func (c *Client) RegressionDiff(id string) ([]byte, error) {
	data, _, err := c.profile(http.MethodGet, "regressions/"+url.PathEscape(id)+"/diff", nil, mergeTimeout)
	return data, err
}

// Check asks whether prog's current version is slower than baseline (a
// tag, a time, or "" for the previous version) by more than limit
// (0.10 = 10%), from the data in [since, until].
func (c *Client) Check(prog, baseline string, limit float64, since, until time.Time) (Check, error) {
	q := timeRange(since, until)
	q.Set("prog", prog)
	q.Set("max", formatPercent(limit))
	if baseline != "" {
		q.Set("baseline", baseline)
	}
	var r Check
	return r, c.get("check", q, &r)
}
