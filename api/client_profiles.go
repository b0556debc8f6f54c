package api

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// mergeTimeout is how long a merge may take: a week of windows is
// thousands of profiles to read and add up.
const mergeTimeout = 10 * time.Minute

// Profiles lists the stored profiles that overlap [since, until]: kind is
// continuous, on-demand or all ("" means all).
func (c *Client) Profiles(since, until time.Time, kind string) ([]ProfileInfo, error) {
	q := timeRange(since, until)
	if kind != "" {
		q.Set("kind", kind)
	}
	var list []ProfileInfo
	return list, c.get("profiles", q, &list)
}

// Profile returns a stored profile's gzipped pprof bytes.
func (c *Client) Profile(id string) ([]byte, error) {
	data, _, err := c.profile(http.MethodGet, "profiles/"+url.PathEscape(id), nil, 0)
	return data, err
}

// MergeProfiles returns the profiles of [since, until] added up, as gzipped
// pprof, and how many were merged. kind "" means continuous windows only.
func (c *Client) MergeProfiles(since, until time.Time, kind string) ([]byte, int, error) {
	q := timeRange(since, until)
	if kind != "" {
		q.Set("kind", kind)
	}
	data, h, err := c.profile(http.MethodGet, "profiles/merge", q, mergeTimeout)
	if err != nil {
		return nil, 0, err
	}
	var n int
	fmt.Sscan(h.Get(HeaderProfileCount), &n)
	return data, n, nil
}

// CaptureProfile has the daemon profile every CPU for d and returns the
// profile, which the daemon also stores. event "" is the daemon's
// --profile.event.
func (c *Client) CaptureProfile(d time.Duration, event string) (Capture, error) {
	q := url.Values{"duration": {d.String()}}
	if event != "" {
		q.Set("event", event)
	}
	data, h, err := c.profile(http.MethodPost, "profiles/capture", q, d+c.http.Timeout)
	if err != nil {
		return Capture{}, err
	}
	return Capture{Data: data, ID: h.Get(HeaderProfileID), StoreError: h.Get(HeaderStoreError)}, nil
}

// profile does a request whose answer is a profile's bytes; timeout 0
// keeps the client's.
func (c *Client) profile(method, path string, query url.Values, timeout time.Duration) ([]byte, http.Header, error) {
	return c.call(request{method: method, path: path, query: query, timeout: timeout}, http.StatusOK, maxProfileAnswer)
}
