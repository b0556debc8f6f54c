package daemon_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestStrictInput: every route refuses a query parameter it does not
// take, naming it and the ones it takes; every filter by program answers
// 404 for an unknown one; unknown routes and wrong methods answer in the
// API's JSON error form; every CLI command refuses an extra argument in
// one line.
func TestStrictInput(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	a := newAPIClient(t, d.socket)
	errorOf := func(body []byte) string {
		var e api.ErrorAnswer
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			return ""
		}
		return e.Error
	}
	for _, r := range everyRoute {
		body, code := a.do(r.method, r.path+"?sinse=1d", nil)
		msg := errorOf(body)
		if code != http.StatusBadRequest || !strings.Contains(msg, `"sinse"`) || !strings.Contains(msg, r.takes) {
			t.Errorf("%s %s?sinse=1d: %d %q, want 400 naming sinse and listing %q", r.method, r.path, code, body, r.takes)
		}
	}
	for _, path := range []string{
		"/v1/progs/nope_nope", "/v1/history?prog=nope_nope", "/v1/events?prog=nope_nope", "/v1/counters/history?prog=nope_nope",
		"/v1/latency/history?prog=nope_nope", "/v1/regressions?prog=nope_nope", "/v1/check?prog=nope_nope&max=10%25",
	} {
		if body, code := a.do("GET", path, nil); code != http.StatusNotFound || !strings.Contains(errorOf(body), "unknown program") {
			t.Errorf("GET %s: %d %q, want 404 unknown program", path, code, body)
		}
	}
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/v1/nope", http.StatusNotFound},
		{"GET", "/nope", http.StatusNotFound},
		{"DELETE", "/v1/status", http.StatusMethodNotAllowed},
		{"POST", "/v1/history", http.StatusMethodNotAllowed},
		{"PUT", "/v1/progs", http.StatusMethodNotAllowed},
	} {
		if body, code := a.do(c.method, c.path, nil); code != c.code || errorOf(body) == "" {
			t.Errorf("%s %s: %d %q, want %d in the JSON error form", c.method, c.path, code, body, c.code)
		}
	}

	for _, args := range [][]string{
		{"status"}, {"progs"}, {"show", "1"}, {"history", "1"}, {"events"}, {"top", "--once"},
		{"store", "stats"}, {"store", "check"}, {"store", "salvage", "--file", "a", "--to", "b"}, {"export"},
		{"profile", "list"}, {"profile", "get", "1"}, {"profile", "capture", "--duration", "1s"},
		{"counters", "list"}, {"counters", "enable", "1"}, {"counters", "disable", "1"}, {"counters", "history", "1"},
		{"profile", "diff", "--base", "a", "--new", "b"}, {"profile", "view", "a"},
		{"bench"}, {"bench", "runs"}, {"bench", "get", "1"}, {"bench", "compare", "a", "b"},
		{"maps"}, {"maps", "show", "1"}, {"owners"}, {"owners", "--triggered"}, {"triggers", "1"}, {"hooks", "1"}, {"regressions"}, {"regressions", "show", "1"},
		{"check", "1", "--max-regression", "10%"},
	} {
		stdout, stderr, code := run(bin.cli, append(append([]string{"--socket", d.socket}, args...), "extra_arg")...)
		oneLineError(t, "bpfperf "+strings.Join(args, " ")+" extra_arg", stdout, stderr, code, "extra_arg")
	}
}

// everyRoute is each /v1 route with an id where it takes one, and the
// query parameters it takes, as its 400 lists them.
var everyRoute = []struct{ method, path, takes string }{
	{"GET", "/v1/status", ""},
	{"GET", "/v1/progs", "all, fields"},
	{"GET", "/v1/progs/1", ""},
	{"GET", "/v1/history", "prog, since, until, step"},
	{"GET", "/v1/events", "prog, since, until"},
	{"GET", "/v1/store/stats", ""},
	{"GET", "/v1/store/check", ""},
	{"GET", "/v1/export", "since, until, format"},
	{"POST", "/v1/bench/runs", "label"},
	{"GET", "/v1/bench/runs", "since, until"},
	{"GET", "/v1/bench/runs/1", ""},
	{"GET", "/v1/counters", ""},
	{"POST", "/v1/counters/enable", "prog, window"},
	{"POST", "/v1/counters/disable", "prog"},
	{"GET", "/v1/counters/history", "prog, since, until"},
	{"POST", "/v1/latency", "prog, duration"},
	{"GET", "/v1/latency/history", "prog, since, until"},
	{"GET", "/v1/profiles", "since, until, kind"},
	{"GET", "/v1/profiles/merge", "since, until, kind"},
	{"GET", "/v1/profiles/1", ""},
	{"POST", "/v1/profiles/capture", "duration, event"},
	{"GET", "/v1/bench/compare", "base, new, min_delta"},
	{"GET", "/v1/maps", "all"},
	{"GET", "/v1/maps/1", "since, until"},
	{"GET", "/v1/owners", "since, until, owner"},
	{"GET", "/v1/triggers", "prog, workload, since, until"},
	{"GET", "/v1/hooks", "prog, since, until"},
	{"GET", "/v1/regressions", "since, until, prog"},
	{"GET", "/v1/regressions/1", ""},
	{"GET", "/v1/regressions/1/diff", ""},
	{"GET", "/v1/check", "prog, baseline, max, since, until"},
}
