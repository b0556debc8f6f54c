package daemon_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestHostileRequests sends every route what a neighbour might: random
// bytes as the body, random bytes in every query parameter and in the
// path's id, a 64 MiB body, and raw bytes that are not HTTP at all. The
// daemon answers each with a 4xx (never a 5xx), stays up, and nothing
// stored changes: no bench run, no counters window, no profile.
func TestHostileRequests(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	a := newAPIClient(t, d.socket)
	rng := rand.New(rand.NewPCG(7, 8))
	junk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	stored := func() string {
		var out []string
		for _, path := range []string{"/v1/bench/runs?since=2020-01-01T00:00:00Z&until=2099-01-01T00:00:00Z", "/v1/counters", "/v1/profiles?since=2020-01-01T00:00:00Z&until=2099-01-01T00:00:00Z"} {
			body, code := a.do("GET", path, nil)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			out = append(out, string(body))
		}
		return strings.Join(out, "\n")
	}
	before := stored()
	check := func(what string, code int, body []byte) {
		t.Helper()
		if code < 400 || code >= 500 {
			t.Errorf("%s: %d %.200q, want a 4xx", what, code, body)
		}
	}
	sent := 0
	for _, r := range everyRoute {
		// Random bytes as the body.
		body, code := a.do(r.method, r.path, bytes.NewReader(junk(4<<10)))
		if r.method == "POST" {
			check(r.method+" "+r.path+" with a random body", code, body)
		} else if code >= 500 {
			t.Errorf("%s %s with a random body: %d %.200q", r.method, r.path, code, body)
		}
		// Random bytes in every parameter it takes.
		q := url.Values{}
		for p := range strings.SplitSeq(r.takes, ", ") {
			if p != "" {
				q.Set(p, string(junk(64)))
			}
		}
		if len(q) > 0 {
			body, code = a.do(r.method, r.path+"?"+q.Encode(), nil)
			check(r.method+" "+r.path+" with random parameters", code, body)
		}
		// Random bytes as the id.
		if strings.HasSuffix(r.path, "/1") || strings.Contains(r.path, "/1/") {
			p := strings.Replace(r.path, "/1", "/"+url.PathEscape(string(junk(32))), 1)
			body, code = a.do(r.method, p, nil)
			check(r.method+" "+p, code, body)
		}
		sent += 3
	}
	// A 64 MiB body to the route that takes one.
	body, code := a.do("POST", "/v1/bench/runs", bytes.NewReader(make([]byte, 64<<20)))
	check("64 MiB body", code, body)
	// Not HTTP at all.
	for range 20 {
		conn, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write(junk(16 << 10))
		reply, _ := io.ReadAll(conn)
		conn.Close()
		if len(reply) > 0 && !bytes.HasPrefix(reply, []byte("HTTP/1.1 4")) {
			t.Errorf("raw bytes: answered %.100q, want a 4xx or nothing", reply)
		}
	}
	t.Logf("%d hostile requests to %d routes, a 64 MiB body and 20 connections of raw bytes", sent, len(everyRoute))

	var st api.Status
	b, code := a.do("GET", "/v1/status", nil)
	if code != http.StatusOK || json.Unmarshal(b, &st) != nil {
		t.Fatalf("status after: %d %s", code, b)
	}
	if after := stored(); after != before {
		t.Errorf("what is stored changed:\nbefore %s\nafter  %s", before, after)
	}
}
