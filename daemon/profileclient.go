package daemon

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// maxProfileAnswer bounds a profile read from the daemon.
const maxProfileAnswer = 1 << 30

// mergeTimeout is how long a merge may take: a week of windows is
// thousands of profiles to read and add up.
const mergeTimeout = 10 * time.Minute

// Profiles lists the stored profiles that overlap [since, until]: kind is
// continuous, on-demand or all ("" means all).
func (c *Client) Profiles(since, until time.Time, kind string) ([]store.ProfileInfo, error) {
	q := url.Values{"since": {since.Format(time.RFC3339Nano)}, "until": {until.Format(time.RFC3339Nano)}}
	if kind != "" {
		q.Set("kind", kind)
	}
	var list []store.ProfileInfo
	return list, c.get("profiles", q, &list)
}

// Profile returns a stored profile's gzipped pprof bytes.
func (c *Client) Profile(id string) ([]byte, error) {
	data, _, err := c.raw(http.MethodGet, "profiles/"+url.PathEscape(id), nil, 0)
	return data, err
}

// MergeProfiles returns the profiles of [since, until] added up, as gzipped
// pprof, and how many were merged. kind "" means continuous windows only.
func (c *Client) MergeProfiles(since, until time.Time, kind string) ([]byte, int, error) {
	q := url.Values{"since": {since.Format(time.RFC3339Nano)}, "until": {until.Format(time.RFC3339Nano)}}
	if kind != "" {
		q.Set("kind", kind)
	}
	data, h, err := c.raw(http.MethodGet, "profiles/merge", q, mergeTimeout)
	if err != nil {
		return nil, 0, err
	}
	var n int
	fmt.Sscan(h.Get(HeaderProfileCount), &n)
	return data, n, nil
}

// Capture is what an on-demand capture returns.
type Capture struct {
	Data []byte // gzipped pprof
	// ID is the stored profile's id; empty when the daemon could not store
	// it, and StoreError says why.
	ID         string
	StoreError string
}

// CaptureProfile has the daemon profile every CPU for d and returns the
// profile, which the daemon also stores.
func (c *Client) CaptureProfile(d time.Duration, event string) (Capture, error) {
	q := url.Values{"duration": {d.String()}}
	if event != "" {
		q.Set("event", event)
	}
	data, h, err := c.raw(http.MethodPost, "profiles/capture", q, d+c.http.Timeout)
	if err != nil {
		return Capture{}, err
	}
	return Capture{Data: data, ID: h.Get(HeaderProfileID), StoreError: h.Get(HeaderStoreError)}, nil
}

// raw does a request whose answer is bytes, not JSON; timeout 0 keeps the
// client's. An API error comes back as its one-line message.
func (c *Client) raw(method, path string, query url.Values, timeout time.Duration) ([]byte, http.Header, error) {
	u := "http://bpfperfd/v1/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return nil, nil, err
	}
	hc := *c.http
	if timeout > 0 {
		hc.Timeout = timeout
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer resp.Body.Close()
	body, err := readAnswer(resp, http.StatusOK, maxProfileAnswer)
	if err != nil {
		return nil, nil, err
	}
	return body, resp.Header, nil
}
