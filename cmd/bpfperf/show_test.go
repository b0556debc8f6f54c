package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
)

// TestShowJSONSaysWhatTheTableSays: show's JSON carries the trigger split
// and the hook overhead its table prints, and where the table says why
// one is missing, the JSON says it too.
func TestShowJSONSaysWhatTheTableSays(t *testing.T) {
	socket := fakeDaemon(t, map[string]any{
		"/v1/progs/7": api.ProgDetail{ProgRow: api.ProgRow{ID: 7, Name: "shown", Loaded: true}},
		"/v1/triggers": api.Triggers{Rows: []api.TriggerRow{
			{ProgID: 7, ProgName: "shown", Workload: "web.service", Context: "task", Share: 0.75},
		}},
		"/v1/hooks": api.ErrorAnswer{Error: "no profile windows in range"},
	})
	table := captureCLI(t, "--socket", socket, "show", "7")
	for _, want := range []string{"triggered by:       web.service 75%", "hook overhead:      - (no profile windows in range)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	var doc struct {
		ID                      uint32        `json:"id"`
		TriggeredBy             *api.Triggers `json:"triggered_by"`
		HookOverhead            *api.Hooks    `json:"hook_overhead"`
		HookOverheadUnavailable string        `json:"hook_overhead_unavailable"`
	}
	out := captureCLI(t, "--socket", socket, "show", "7", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.ID != 7 || doc.TriggeredBy == nil || len(doc.TriggeredBy.Rows) != 1 || doc.TriggeredBy.Rows[0].Workload != "web.service" ||
		doc.HookOverhead != nil || doc.HookOverheadUnavailable != "no profile windows in range" {
		t.Errorf("show -o json: %s\nwant id 7, triggered_by with web.service, no hook_overhead and hook_overhead_unavailable saying why", out)
	}
}

// fakeDaemon answers GET path with its document as JSON (an
// api.ErrorAnswer with status 503) on a unix socket, and says where.
func fakeDaemon(t *testing.T, docs map[string]any) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, failed := doc.(api.ErrorAnswer); failed {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(doc)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return socket
}

// captureCLI runs the app with args and returns what it wrote to stdout
// (the commands write to os.Stdout itself).
func captureCLI(t *testing.T, args ...string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	app := newApp(dialDaemon)
	err = app.Run(interspersed(app, append([]string{"bpfperf"}, args...)))
	os.Stdout = stdout
	w.Close()
	if err != nil {
		t.Fatalf("bpfperf %s: %v", strings.Join(args, " "), err)
	}
	return <-out
}
