package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"
)

// Client talks to bpfperfd over its unix socket. The CLI gets one from a
// factory so its commands can be tested against a real daemon.
type Client struct {
	socket string
	http   *http.Client
}

// Dial checks that a daemon answers on socket and returns a client for it.
func Dial(socket string, timeout time.Duration) (*Client, error) {
	if _, err := os.Stat(socket); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: socket %s does not exist (start bpfperfd, or set --socket / BPFPERF_SOCKET)", ErrNoDaemon, socket)
		}
		return nil, fmt.Errorf("socket %s: %w", socket, err)
	}
	conn, err := net.DialTimeout("unix", socket, timeout)
	switch {
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("permission denied on %s: run as root or join the bpfperf group", socket)
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("%w: nothing listens on %s (stale socket?)", ErrNoDaemon, socket)
	case err != nil:
		return nil, fmt.Errorf("connect to %s: %w", socket, err)
	}
	conn.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{socket: socket, http: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// Bounds on the answers read from the daemon: listings can be large, the
// answers to state changes are small, profiles and bench reports are
// bytes of their own.
const (
	maxJSONAnswer    = 256 << 20
	maxPostAnswer    = 16 << 20
	maxProfileAnswer = 1 << 30
	maxBenchAnswer   = MaxBenchReport + 1<<20
	// Error bodies are one short JSON line.
	maxErrorAnswer = 1 << 20
)

// noTimeout, as a request's timeout, lets it take as long as it takes.
const noTimeout = -1

// request is one call of the API.
type request struct {
	method string
	path   string // below /v1/
	query  url.Values
	body   io.Reader // JSON, or nil
	// timeout is how long the whole call may take: 0 keeps the client's,
	// noTimeout has none.
	timeout time.Duration
}

// send does r and returns the daemon's answer, whatever its status. The
// caller closes its body. A daemon that does not answer is ErrNoDaemon.
func (c *Client) send(r request) (*http.Response, error) {
	u := "http://bpfperfd/v1/" + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequest(r.method, u, r.body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.http
	if r.timeout != 0 {
		withTimeout := *c.http
		withTimeout.Timeout = max(r.timeout, 0)
		hc = &withTimeout
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDaemon, err)
	}
	return resp, nil
}

// call does r and reads at most limit bytes of an answer with status want.
// Any other answer is an error carrying the daemon's one-line message.
func (c *Client) call(r request, want int, limit int64) ([]byte, http.Header, error) {
	resp, err := c.send(r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := readAnswer(resp, want, limit)
	if err != nil {
		return nil, nil, err
	}
	return body, resp.Header, nil
}

// readAnswer reads at most limit bytes of an answer the daemon gave with
// status want, or turns any other answer into an error carrying the
// daemon's one-line message.
func readAnswer(resp *http.Response, want int, limit int64) ([]byte, error) {
	if resp.StatusCode != want {
		limit = maxErrorAnswer
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != want {
		var e ErrorAnswer
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, errors.New(e.Error)
		}
		return nil, fmt.Errorf("daemon answered %s", resp.Status)
	}
	return body, nil
}

// get fetches /v1/path?query into out.
func (c *Client) get(path string, query url.Values, out any) error {
	body, _, err := c.call(request{method: http.MethodGet, path: path, query: query}, http.StatusOK, maxJSONAnswer)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// post sends POST /v1/path?query and decodes the answer into out, like get.
func (c *Client) post(path string, query url.Values, out any) error {
	body, _, err := c.call(request{method: http.MethodPost, path: path, query: query}, http.StatusOK, maxPostAnswer)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// timeRange is the since and until of a query.
func timeRange(since, until time.Time) url.Values {
	return url.Values{"since": {since.Format(time.RFC3339Nano)}, "until": {until.Format(time.RFC3339Nano)}}
}

// optionalRange is timeRange, or no parameters for a zero since: the
// daemon's default range.
func optionalRange(since, until time.Time) url.Values {
	if since.IsZero() {
		return url.Values{}
	}
	return timeRange(since, until)
}

// Status returns the daemon's status.
func (c *Client) Status() (Status, error) {
	var s Status
	return s, c.get("status", nil, &s)
}

// MeasureStatsCost has the daemon measure bpf_stats' cost per run again
// (stats off for a moment after its next tick) and returns the new
// figure; it waits the daemon's interval, the measurement and the
// client's timeout.
func (c *Client) MeasureStatsCost(interval time.Duration) (*StatsCost, error) {
	var sc StatsCost
	body, _, err := c.call(request{method: http.MethodPost, path: "stats-cost/measure", timeout: 2*interval + 10*time.Second + c.http.Timeout}, http.StatusOK, maxPostAnswer)
	if err != nil {
		return nil, err
	}
	return &sc, json.Unmarshal(body, &sc)
}

// Progs lists loaded programs, and with all also the unloaded ones still in
// the store.
func (c *Client) Progs(all bool) ([]ProgRow, error) {
	var rows []ProgRow
	q := url.Values{}
	if all {
		q.Set("all", "true")
	}
	return rows, c.get("progs", q, &rows)
}

// ProgCounters lists loaded programs' latest counters only: a small answer
// for frequent refreshes.
func (c *Client) ProgCounters() ([]ProgCounters, error) {
	var rows []ProgCounters
	return rows, c.get("progs", url.Values{"fields": {"counters"}}, &rows)
}

// Show returns one program's row and metadata.
func (c *Client) Show(prog string) (ProgDetail, error) {
	var d ProgDetail
	return d, c.get("progs/"+url.PathEscape(prog), nil, &d)
}

// History returns a program's points between since and until.
func (c *Client) History(prog string, since, until time.Time, step time.Duration) (History, error) {
	q := timeRange(since, until)
	q.Set("prog", prog)
	if step > 0 {
		q.Set("step", step.String())
	}
	var h History
	return h, c.get("history", q, &h)
}

// Events returns the stored events between since and until, of one program
// when prog (an id, name or name@tag) is not empty.
func (c *Client) Events(since, until time.Time, prog string) (Events, error) {
	q := timeRange(since, until)
	if prog != "" {
		q.Set("prog", prog)
	}
	var e Events
	return e, c.get("events", q, &e)
}

// StoreStats returns what the store holds.
func (c *Client) StoreStats() (StoreStats, error) {
	var s StoreStats
	return s, c.get("store/stats", nil, &s)
}

// StoreCheck checks the whole store.
func (c *Client) StoreCheck() (StoreCheck, error) {
	var s StoreCheck
	return s, c.get("store/check", nil, &s)
}

// Export streams raw samples between since and until to w as csv or jsonl.
func (c *Client) Export(w io.Writer, since, until time.Time, format string) error {
	q := timeRange(since, until)
	q.Set("format", format)
	// An export can take longer than one API call may.
	resp, err := c.send(request{method: http.MethodGet, path: "export", query: q, timeout: noTimeout})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, err := readAnswer(resp, http.StatusOK, 0)
		return err
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if msg := resp.Trailer.Get(TrailerExportError); msg != "" {
		return fmt.Errorf("export stopped early: %s", msg)
	}
	return nil
}
