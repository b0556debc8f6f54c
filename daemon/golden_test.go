package daemon_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// The golden test locks the JSON shape of every /v1 endpoint, so that the
// wire types can move between packages without a client noticing. It is
// black-box on purpose: it starts bpfperfd as the other end-to-end tests
// do (startDaemon), then speaks plain HTTP to its socket and never names a
// Go type of the daemon, the store or the collectors.
//
// A JSON document is reduced to its shape: every scalar becomes its type
// ("<null>", "<bool>", "<number>", "<string>", or "<time>" for a string
// that parses as RFC 3339), every object key is kept, an array becomes a
// one-element array holding the merged shape of all its elements ([] when
// only empty arrays were seen), and a value seen with several types becomes
// {"<oneof>": [...]}. Objects whose keys are data, not field names (see
// dataKeyed), keep one key "<key>" for all of them. Shapes are merged over
// every answer an endpoint gives during the test, the answers to the
// test's polls included.
//
// Keys come and go with timing (omitempty fields: a rate needs two
// sweeps, last_error needs an error), so an exact comparison would be
// flaky. The rule is instead, for each golden file:
//
//   - what was seen must fit the golden shape: every key seen is in the
//     file, with a type the file allows there (a renamed key or a changed
//     type fails);
//   - every key the file lists without a "?" suffix must be present in
//     every object seen at that place (a dropped field fails).
//
// A key is optional ("?") only with a reason in optionalKeys
// (golden_optional_test.go) that this run proves: a key declared absent
// on this host (no PMU, no fentry/fexit, a feature not exercised) must
// not be seen, and a key declared sometimes present must be seen both
// present and absent, or in the one case the test's setup can give.
// An optional key without a reason fails, and so does one seen in every
// object without a reason it can be absent: make it required.
//
// go test ./daemon -run Golden -update rewrites the files from what the
// run saw, merged into what the files hold: optional keys seen in earlier
// runs or added by hand stay, and keys missing this time turn optional
// (each then needs its reason). To drop or rename a key on purpose, edit
// or delete the file and run -update again.
var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.json from this run's shapes, merged into the files")

const goldenDir = "testdata/golden"

// dataKeyed are keys whose value is a map from data (a resolution, an
// event name, a sysctl) to values: its keys are not part of the API.
var dataKeyed = map[string]bool{
	"resolutions":     true, // /v1/store/stats: "raw", "1m0s", "1h0m0s", "counters"
	"totals":          true, // perf counters: per event name
	"jit":             true, // bench report fingerprint: sysctls
	"vulnerabilities": true, // bench report fingerprint: /sys/devices/system/cpu/vulnerabilities
	"labels":          true, // bench test labels
	"events":          true, // bench report results: per counted event (lists named events stay lists)
	"events_per_run":  true, // bench report runs: per counted event
	"events_net":      true, // bench report results: per counted event
}

func TestGoldenAPI(t *testing.T) {
	privtest.Root(t)
	start := time.Now()
	hotName, idleName, ctrName := uniqueName("gold_hot"), uniqueName("gold_idle"), uniqueName("gold_ctr")
	reloadName, twinName := uniqueName("gold_rld"), uniqueName("gold_twin")
	// Continuous profiling in 1 s windows fills sampled_cpu_percent and
	// the sampled perf counters; the counters glob gives /v1/counters a
	// target (refused here, counted where fentry works). Stats stay on
	// all the time (no budget): the hot program would take them past the
	// default budget, and the runs of the programs run a few times beside
	// it are asserted exactly. The bare daemon below runs at the default.
	d := startDaemon(t, t.TempDir(), "--profile.every", "1s", "--counters.programs", ctrName, "--stats.budget", "0")
	api := newAPIClient(t, d.socket)

	hotID, _ := hotProgram(t, hotName)
	idle, err := privtest.LoadSocketFilter(idleName)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if err := privtest.Run(idle, 7); err != nil {
		t.Fatal(err)
	}
	idleID := progID(t, idle)
	attachedID := attachedProgram(t, uniqueName("gold_att"))
	ctr := loadBTFTarget(t, ctrName, 10)
	if err := privtest.Run(ctr, 3); err != nil {
		t.Fatal(err)
	}
	var twinID uint32 // a program nobody runs
	for range 2 {
		twin, err := privtest.LoadSocketFilter(twinName)
		if err != nil {
			t.Fatal(err)
		}
		defer twin.Close()
		twinID = progID(t, twin)
	}

	// A program loaded, run, unloaded and loaded again: an unloaded
	// instance for progs?all=true and show, and a reload in its history.
	first, err := privtest.LoadSocketFilter(reloadName)
	if err != nil {
		t.Fatal(err)
	}
	firstID := progID(t, first)
	if err := privtest.Run(first, 5); err != nil {
		t.Fatal(err)
	}
	api.poll("the first "+reloadName+" to be sampled", "prog", "/v1/progs/"+fmt.Sprint(firstID), func(v any) bool {
		return num(v, "run_cnt") == 5
	})
	first.Close()
	api.poll("the first "+reloadName+" to be unloaded", "progs_all", "/v1/progs?all=true", func(v any) bool {
		return rowOf(v, firstID)["unloaded_at"] != nil
	})
	second, err := privtest.LoadSocketFilter(reloadName)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := privtest.Run(second, 3); err != nil {
		t.Fatal(err)
	}
	secondID := progID(t, second)

	// Wait for everything the listings should show: the sampled window of
	// the busy program, the second instance's runs, the counter target.
	api.poll("sampled perf counters of "+hotName, "progs", "/v1/progs", func(v any) bool {
		row := rowOf(v, hotID)
		return row["perf_counters"] != nil && row["sampled_cpu_percent"] != nil && row["runs_per_sec"] != nil &&
			num(rowOf(v, secondID), "run_cnt") == 3 && num(rowOf(v, idleID), "run_cnt") == 7
	})
	// Owners and attach points are read at most every 5 s.
	api.poll("owners and attach points", "progs", "/v1/progs", func(v any) bool {
		return rowOf(v, secondID)["pids"] != nil && rowOf(v, attachedID)["attach"] != nil
	})
	api.poll("the counters target", "counters", "/v1/counters", func(v any) bool {
		targets, _ := field(v, "targets").([]any)
		return len(targets) == 1
	})
	api.poll("a counters history point", "counters_history", "/v1/counters/history?prog="+hotName+"&since=10m", func(v any) bool {
		points, _ := field(v, "points").([]any)
		return len(points) > 0
	})
	// A rate needs two sweeps with runs between inside the step: poll
	// until the busy program's history has one (a fast run of the test
	// once reached the GETs below with under a second of samples).
	api.poll("a rate in the busy program's history", "history", "/v1/history?prog="+fmt.Sprint(hotID)+"&since=1m&step=1s", func(v any) bool {
		points, _ := field(v, "points").([]any)
		return slices.ContainsFunc(points, func(p any) bool { return field(p, "runs_per_sec") != nil })
	})
	api.poll("a reload in the history", "history", "/v1/history?prog="+reloadName+"&since=10m", func(v any) bool {
		points, _ := field(v, "points").([]any)
		return slices.ContainsFunc(points, func(p any) bool { return field(p, "reload") == true })
	})

	// A bench run: the real CLI's report, stored through the API.
	report, errOut, code := run(bin.cli, slices.Concat(benchArgs, []string{"-o", "json"})...)
	if code != 0 {
		t.Fatalf("bpfperf bench: exit %d: %s", code, errOut)
	}
	// Stored once without a label, then with one (the one "last" names).
	api.post("bench_post", "/v1/bench/runs", []byte(report), http.StatusCreated)
	stored := api.post("bench_post", "/v1/bench/runs?label=golden", []byte(report), http.StatusCreated)
	benchID := fmt.Sprint(num(stored, "id"))

	// Every GET, and a second round so that what changes between sweeps
	// shows in the shapes.
	for range 2 {
		api.get("status", "/v1/status")
		api.get("progs", "/v1/progs")
		api.get("progs_all", "/v1/progs?all=true")
		api.get("progs_counters", "/v1/progs?fields=counters")
		for _, ref := range []string{fmt.Sprint(hotID), hotName, fmt.Sprint(idleID), ctrName, reloadName, fmt.Sprint(firstID), fmt.Sprint(attachedID), fmt.Sprint(twinID)} {
			api.get("prog", "/v1/progs/"+url.PathEscape(ref))
		}
		api.get("history", "/v1/history?prog="+reloadName+"&since=10m")
		api.get("history", "/v1/history?prog="+fmt.Sprint(hotID)+"&since=1m&step=1s")
		api.get("history", "/v1/history?prog="+idleName+"&since=1m&until=now")
		api.get("events", "/v1/events?since=10m")
		api.get("events", "/v1/events?since=10m&prog="+reloadName)
		api.get("store_stats", "/v1/store/stats")
		api.get("store_check", "/v1/store/check")
		api.get("profiles", "/v1/profiles?since=1h")
		api.get("profiles", "/v1/profiles?since=1h&kind=continuous")
		api.get("counters", "/v1/counters")
		api.get("counters_history", "/v1/counters/history?prog="+hotName+"&since=10m")
		api.get("bench_runs", "/v1/bench/runs")
		api.get("bench_runs", "/v1/bench/runs?since=1h")
		api.get("bench_compare", "/v1/bench/compare?base="+benchID+"&new="+benchID)
		api.get("owners", "/v1/owners")
		api.get("owners", "/v1/owners?since=10m")
		api.get("regressions", "/v1/regressions?since=1h")
		maps := api.get("maps", "/v1/maps?all=true")
		if rows, _ := field(maps, "maps").([]any); len(rows) > 0 {
			api.get("map", fmt.Sprintf("/v1/maps/%v?since=10m", num(rows[0], "id")))
		}
	}
	// A second daemon as bare as it comes (sweeping by fd, no continuous
	// profiling, no counter targets): what status and counters leave out
	// then, into the same shapes.
	bare := startDaemon(t, t.TempDir(), "--sweep", "fd", "--profile.every", "0")
	bareAPI := api.sibling(bare.socket)
	bareAPI.poll("the bare daemon's first sweep", "status", "/v1/status", func(v any) bool {
		return field(v, "last_sample") != nil && field(v, "counters") != nil
	})
	bareAPI.get("counters", "/v1/counters")

	// The gate on a program with one version: an answer that says the
	// data cannot decide, in the check's own form.
	if body, status := api.do(http.MethodGet, "/v1/check?prog="+reloadName, nil); status == http.StatusOK {
		api.observe("check", body)
	} else {
		api.errorCase("check_one_version", status, body)
	}
	api.post("counters_disable", "/v1/counters/disable?prog="+ctrName, nil, http.StatusOK)
	api.exportJSONL("/v1/export?format=jsonl&since=10m")
	api.exportCSV("/v1/export?format=csv&since=10m")
	api.profileData(field(api.get("status", "/v1/status"), "profiling", "last_profile_id"))

	// The stored report comes back as it was sent.
	for _, ref := range []string{benchID, "last"} {
		body, hdr := api.raw("bench_report", http.MethodGet, "/v1/bench/runs/"+ref, nil, http.StatusOK, "application/json")
		if !bytes.Equal(body, []byte(report)) {
			t.Errorf("GET /v1/bench/runs/%s: the report differs from the one stored", ref)
		}
		if got := hdr.Get("Bpfperf-Bench-Run"); got != benchID {
			t.Errorf("GET /v1/bench/runs/%s: Bpfperf-Bench-Run %q, want %s", ref, got, benchID)
		}
		api.observe("bench_report", body)
	}

	// Enabling exact counters answers a target where fentry works, and
	// an error that says why everywhere else (here: tracing refused).
	if body, status := api.do(http.MethodPost, "/v1/counters/enable?prog="+ctrName, nil); status == http.StatusOK {
		// The answer is one target, as /v1/counters lists them.
		api.observeAs("counters", []string{"targets", "[]"}, body)
	} else {
		api.errorCase("counters_enable_unavailable", status, body)
	}

	// Errors: every non-2xx answer is {"error": "..."}, with its status.
	for _, c := range []struct{ name, method, path, body string }{
		{"unknown_program", "GET", "/v1/progs/no_such_prog_xyz", ""},
		{"unknown_program_id", "GET", "/v1/progs/4000000000", ""},
		{"ambiguous_program", "GET", "/v1/progs/" + twinName, ""},
		{"bad_all", "GET", "/v1/progs?all=maybe", ""},
		{"bad_fields", "GET", "/v1/progs?fields=everything", ""},
		{"fields_counters_all", "GET", "/v1/progs?fields=counters&all=true", ""},
		{"history_no_prog", "GET", "/v1/history", ""},
		{"history_bad_since", "GET", "/v1/history?prog=" + hotName + "&since=yesterday", ""},
		{"history_bad_step", "GET", "/v1/history?prog=" + hotName + "&step=0s", ""},
		{"history_unknown_program", "GET", "/v1/history?prog=no_such_prog_xyz", ""},
		{"events_until_before_since", "GET", "/v1/events?since=1h&until=2h", ""},
		{"export_bad_format", "GET", "/v1/export?format=xml", ""},
		{"profiles_bad_kind", "GET", "/v1/profiles?kind=sometimes", ""},
		{"profile_unknown", "GET", "/v1/profiles/no_such_profile", ""},
		{"counters_history_no_prog", "GET", "/v1/counters/history", ""},
		{"counters_enable_bad_window", "POST", "/v1/counters/enable?prog=" + ctrName + "&window=1ms", ""},
		{"bench_run_unknown", "GET", "/v1/bench/runs/99", ""},
		{"bench_run_bad_ref", "GET", "/v1/bench/runs/soon", ""},
		{"bench_runs_bad_since", "GET", "/v1/bench/runs?since=soon", ""},
		{"bench_post_not_a_report", "POST", "/v1/bench/runs", "hello"},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		b, status := api.do(c.method, c.path, body)
		api.errorCase(c.name, status, b)
	}

	api.check()
	t.Logf("golden test took %s", time.Since(start).Round(time.Millisecond))
}

// attachedProgram attaches a raw tracepoint program that does nothing to
// task_rename, which fires only when a task renames itself, so that the
// daemon has a link to list as an attach point.
func attachedProgram(t *testing.T, name string) uint32 {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.RawTracepoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load raw tracepoint program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "task_rename", Program: prog})
	if err != nil {
		t.Fatalf("attach to task_rename: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return progID(t, prog)
}

// progID is the kernel's id of a program the test loaded.
func progID(t *testing.T, prog *ebpf.Program) uint32 {
	t.Helper()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("program info has no id")
	}
	return uint32(id)
}

// field walks a decoded JSON document by object keys; nil if absent.
func field(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func num(v any, keys ...string) float64 {
	f, _ := field(v, keys...).(float64)
	return f
}

// rowOf finds the row of program id in a decoded program list.
func rowOf(v any, id uint32) map[string]any {
	rows, _ := v.([]any)
	for _, r := range rows {
		if m, _ := r.(map[string]any); m != nil && num(m, "id") == float64(id) {
			return m
		}
	}
	return nil
}

// apiClient is plain HTTP on the daemon's unix socket. It collects the
// shape of every answer under the name of its golden file.
type apiClient struct {
	t      *testing.T
	http   *http.Client
	shapes map[string]*shape
	errs   map[string]errorShape
	parts  []part
	header []string // the CSV export's header
}

type errorShape struct {
	status int
	body   *shape
}

func newAPIClient(t *testing.T, socket string) *apiClient {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}
	return &apiClient{
		t:      t,
		http:   &http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: 30 * time.Second},
		shapes: map[string]*shape{},
		errs:   map[string]errorShape{},
	}
}

// sibling is a client of another daemon whose answers count in a's shapes.
func (a *apiClient) sibling(socket string) *apiClient {
	b := newAPIClient(a.t, socket)
	b.shapes, b.errs = a.shapes, a.errs
	return b
}

// do sends a request and returns the body and status.
func (a *apiClient) do(method, path string, body io.Reader) ([]byte, int) {
	b, status, _ := a.send(method, path, body)
	return b, status
}

func (a *apiClient) send(method, path string, body io.Reader) ([]byte, int, *http.Response) {
	a.t.Helper()
	req, err := http.NewRequest(method, "http://bpfperfd"+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return b, resp.StatusCode, resp
}

// raw sends a request that must answer status with contentType.
func (a *apiClient) raw(file, method, path string, body []byte, status int, contentType string) ([]byte, http.Header) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	b, got, resp := a.send(method, path, r)
	if got != status {
		a.t.Fatalf("%s %s (%s): status %d, want %d: %s", method, path, file, got, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		a.t.Errorf("%s %s: Content-Type %q, want %q", method, path, ct, contentType)
	}
	return b, resp.Header
}

// get fetches a JSON document, records its shape under file and returns it.
func (a *apiClient) get(file, path string) any {
	a.t.Helper()
	b, _ := a.raw(file, http.MethodGet, path, nil, http.StatusOK, "application/json")
	return a.observe(file, b)
}

func (a *apiClient) post(file, path string, body []byte, status int) any {
	a.t.Helper()
	b, _ := a.raw(file, http.MethodPost, path, body, status, "application/json")
	return a.observe(file, b)
}

// poll gets path every 50 ms until it answers and cond holds, for up to
// 20 s. Each answer counts as an observation of file.
func (a *apiClient) poll(what, file, path string, cond func(any) bool) {
	a.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, status := a.do(http.MethodGet, path, nil)
		if status == http.StatusOK && cond(a.observe(file, b)) {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("timed out waiting for %s (GET %s: %d %.300s)", what, path, status, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// observe decodes one JSON document (nothing may follow it) and merges
// its shape into file's.
func (a *apiClient) observe(file string, b []byte) any {
	a.t.Helper()
	doc, err := decodeOne(b)
	if err != nil {
		a.t.Fatalf("%s: %v\n%.500s", file, err, b)
	}
	a.shapes[file] = merge(a.shapes[file], shapeOf(doc, ""))
	return doc
}

// observeAs decodes a document that must fit a part of file's golden
// shape: the one at path ("[]" steps into an array's elements).
func (a *apiClient) observeAs(file string, path []string, b []byte) {
	a.t.Helper()
	doc, err := decodeOne(b)
	if err != nil {
		a.t.Fatalf("%s %v: %v\n%.500s", file, path, err, b)
	}
	a.parts = append(a.parts, part{file: file, path: path, shape: shapeOf(doc, "")})
}

type part struct {
	file  string
	path  []string
	shape *shape
}

func decodeOne(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON document")
	}
	return doc, nil
}

// errorCase records a non-2xx answer's status and body shape.
func (a *apiClient) errorCase(name string, status int, body []byte) {
	a.t.Helper()
	if status < 400 {
		a.t.Errorf("error case %s: status %d: %s", name, status, body)
		return
	}
	doc, err := decodeOne(body)
	if err != nil {
		a.t.Errorf("error case %s: %v\n%s", name, err, body)
		return
	}
	a.errs[name] = errorShape{status: status, body: shapeOf(doc, "")}
}

// exportJSONL records the shape of every line of a JSONL export.
func (a *apiClient) exportJSONL(path string) {
	a.t.Helper()
	b, _ := a.raw("export_jsonl", http.MethodGet, path, nil, http.StatusOK, "application/jsonl")
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		a.t.Fatalf("GET %s: no lines", path)
	}
	for _, l := range lines {
		a.observe("export_jsonl", []byte(l))
	}
}

// exportCSV keeps the CSV export's header, and checks each row has as
// many fields.
func (a *apiClient) exportCSV(path string) {
	a.t.Helper()
	b, _ := a.raw("export_csv", http.MethodGet, path, nil, http.StatusOK, "text/csv")
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	if len(rows) < 2 {
		a.t.Fatalf("GET %s: %d rows, want a header and samples", path, len(rows))
	}
	a.header = rows[0] // the csv reader checks every row has as many fields
}

// profileData checks the profile endpoints that answer pprof data, not
// JSON: a stored window by id, and the merge of the last hour.
func (a *apiClient) profileData(id any) {
	a.t.Helper()
	s, ok := id.(string)
	if !ok || s == "" {
		a.t.Fatalf("status has no last_profile_id: %v", id)
	}
	b, hdr := a.raw("profile", http.MethodGet, "/v1/profiles/"+url.PathEscape(s), nil, http.StatusOK, "application/octet-stream")
	if len(b) == 0 || hdr.Get("Bpfperf-Profile-Id") != s {
		a.t.Errorf("GET /v1/profiles/%s: %d bytes, Bpfperf-Profile-Id %q", s, len(b), hdr.Get("Bpfperf-Profile-Id"))
	}
	b, hdr = a.raw("profile_merge", http.MethodGet, "/v1/profiles/merge?since=1h", nil, http.StatusOK, "application/octet-stream")
	if len(b) == 0 || hdr.Get("Bpfperf-Profile-Count") == "" {
		a.t.Errorf("GET /v1/profiles/merge: %d bytes, Bpfperf-Profile-Count %q", len(b), hdr.Get("Bpfperf-Profile-Count"))
	}
}

// check compares what was seen with the golden files, or with -update
// merges it into them.
func (a *apiClient) check() {
	a.t.Helper()
	files := make([]string, 0, len(a.shapes))
	for f := range a.shapes {
		files = append(files, f)
	}
	sort.Strings(files)
	// On a host with a PMU or fentry, the keys declared absent for want of
	// them are not (the check asks nothing of them there).
	support := collectors.ProbeCounters()
	opt := &optionalCheck{used: map[string]bool{}, hasPMU: privtest.NoPMU(a.t) == "", hasFentry: support.Exact == nil}
	for _, f := range files {
		path := filepath.Join(goldenDir, f+".json")
		golden, err := readShape(path)
		if *updateGolden {
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				a.t.Fatal(err)
			}
			a.write(path, encodeShape(merge(golden, a.shapes[f])))
			continue
		}
		if err != nil {
			a.t.Errorf("%v (go test ./daemon -run Golden -update writes it)", err)
			continue
		}
		for _, p := range fits(a.shapes[f], golden, "") {
			a.t.Errorf("%s: %s", path, p)
		}
		opt.walk(f, "", a.shapes[f], golden, false)
	}
	for _, p := range a.parts {
		path := filepath.Join(goldenDir, p.file+".json")
		if *updateGolden {
			a.t.Logf("%s: -update does not write the part at %v; edit it by hand if it does not fit", path, p.path)
			continue
		}
		golden, err := readShape(path)
		if err != nil {
			a.t.Error(err)
			continue
		}
		for _, step := range p.path {
			switch {
			case golden == nil:
			case step == "[]":
				golden = golden.elem
			case golden.members[step] != nil:
				golden = golden.members[step].shape
			default:
				golden = nil
			}
		}
		if golden == nil {
			a.t.Errorf("%s: nothing at %v", path, p.path)
			continue
		}
		for _, problem := range fits(p.shape, golden, strings.Join(p.path, ".")) {
			a.t.Errorf("%s: %s", path, problem)
		}
		opt.walk(p.file, strings.ReplaceAll(strings.Join(p.path, "."), ".[]", "[]"), p.shape, golden, true)
	}
	if !*updateGolden {
		for _, p := range opt.problems {
			a.t.Errorf("%s/%s", goldenDir, p)
		}
		for _, k := range opt.unused() {
			a.t.Errorf("optionalKeys[%q]: no optional key in the golden files uses it", k)
		}
	}
	a.checkErrors(filepath.Join(goldenDir, "errors.json"))
	a.checkCSV(filepath.Join(goldenDir, "export_csv.json"))
}

// checkErrors: errors.json maps each case to its status and body shape.
func (a *apiClient) checkErrors(path string) {
	a.t.Helper()
	golden := map[string]errorShape{}
	b, err := os.ReadFile(path)
	if err == nil {
		var raw map[string]struct {
			Status int `json:"status"`
			Body   any `json:"body"`
		}
		if err = json.Unmarshal(b, &raw); err != nil {
			a.t.Fatalf("%s: %v", path, err)
		}
		for name, c := range raw {
			s, err := decodeShape(c.Body)
			if err != nil {
				a.t.Fatalf("%s: %s: %v", path, name, err)
			}
			golden[name] = errorShape{status: c.Status, body: s}
		}
	}
	if *updateGolden {
		out := map[string]any{}
		for name, c := range golden {
			out[name] = map[string]any{"status": c.status, "body": encodeShape(c.body)}
		}
		for name, c := range a.errs {
			out[name] = map[string]any{"status": c.status, "body": encodeShape(merge(golden[name].body, c.body))}
		}
		a.write(path, out)
		return
	}
	if err != nil {
		a.t.Errorf("%v (go test ./daemon -run Golden -update writes it)", err)
		return
	}
	names := make([]string, 0, len(a.errs))
	for name := range a.errs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		got, want := a.errs[name], golden[name]
		if want.body == nil {
			a.t.Errorf("%s: error case %s is not in the file", path, name)
			continue
		}
		if got.status != want.status {
			a.t.Errorf("%s: %s: status %d, golden says %d", path, name, got.status, want.status)
		}
		for _, p := range fits(got.body, want.body, name) {
			a.t.Errorf("%s: %s", path, p)
		}
	}
}

// checkCSV: export_csv.json holds the CSV header as it must be, in order.
func (a *apiClient) checkCSV(path string) {
	a.t.Helper()
	if *updateGolden {
		a.write(path, map[string]any{"header": a.header})
		return
	}
	var golden struct {
		Header []string `json:"header"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &golden)
	}
	if err != nil {
		a.t.Errorf("%s: %v", path, err)
		return
	}
	if !slices.Equal(a.header, golden.Header) {
		a.t.Errorf("%s: CSV header %q, golden says %q", path, a.header, golden.Header)
	}
}

// write writes v indented, keys sorted, without HTML escapes.
func (a *apiClient) write(path string, v any) {
	a.t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		a.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		a.t.Fatal(err)
	}
	a.t.Logf("wrote %s", path)
}

// Scalar types of a shape, in the order they are written.
var scalarKinds = []string{"<null>", "<bool>", "<number>", "<string>", "<time>"}

// shape is the type of a JSON value: the scalar types it was seen with,
// and if it was seen as an array or an object, what those held.
type shape struct {
	scalars map[string]bool
	elem    *shape             // non-nil once seen as an array; empty if only empty arrays
	members map[string]*member // non-nil once seen as an object
}

type member struct {
	shape *shape
	// optional: absent from some object seen here, or marked "?" in the
	// golden file.
	optional bool
}

func (s *shape) empty() bool {
	return s == nil || len(s.scalars) == 0 && s.elem == nil && s.members == nil
}

// shapeOf reduces a decoded JSON value to its shape; key is the key it
// was found under.
func shapeOf(v any, key string) *shape {
	s := &shape{}
	scalar := func(k string) *shape { s.scalars = map[string]bool{k: true}; return s }
	switch v := v.(type) {
	case nil:
		return scalar("<null>")
	case bool:
		return scalar("<bool>")
	case float64:
		return scalar("<number>")
	case string:
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return scalar("<time>")
		}
		return scalar("<string>")
	case []any:
		s.elem = &shape{}
		for _, e := range v {
			s.elem = merge(s.elem, shapeOf(e, ""))
		}
	case map[string]any:
		s.members = map[string]*member{}
		if dataKeyed[key] {
			var values *shape
			for _, e := range v {
				values = merge(values, shapeOf(e, ""))
			}
			if values != nil {
				s.members["<key>"] = &member{shape: values, optional: true}
			}
			return s
		}
		for k, e := range v {
			s.members[k] = &member{shape: shapeOf(e, k)}
		}
	default:
		panic(fmt.Sprintf("decoded JSON holds a %T", v))
	}
	return s
}

// merge is the shape of values of shape a or b. A key that one of two
// objects lacks is optional.
func merge(a, b *shape) *shape {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := &shape{}
	for _, s := range []*shape{a, b} {
		for k := range s.scalars {
			if out.scalars == nil {
				out.scalars = map[string]bool{}
			}
			out.scalars[k] = true
		}
	}
	if a.elem != nil || b.elem != nil {
		out.elem = merge(a.elem, b.elem)
	}
	switch {
	case a.members == nil:
		out.members = b.members
	case b.members == nil:
		out.members = a.members
	default:
		out.members = map[string]*member{}
		for k, ma := range a.members {
			mb := b.members[k]
			if mb == nil {
				out.members[k] = &member{shape: ma.shape, optional: true}
				continue
			}
			out.members[k] = &member{shape: merge(ma.shape, mb.shape), optional: ma.optional || mb.optional}
		}
		for k, mb := range b.members {
			if a.members[k] == nil {
				out.members[k] = &member{shape: mb.shape, optional: true}
			}
		}
	}
	return out
}

// fits lists how seen does not fit golden: keys or types golden does not
// allow, and keys golden requires that some object seen lacked.
func fits(seen, golden *shape, path string) []string {
	var problems []string
	at := path
	if at == "" {
		at = "(top)"
	}
	for _, k := range scalarKinds {
		if seen.scalars[k] && !golden.scalars[k] {
			problems = append(problems, fmt.Sprintf("%s: %s, golden says %s", at, k, describe(golden)))
		}
	}
	if seen.elem != nil {
		if golden.elem == nil {
			problems = append(problems, fmt.Sprintf("%s: an array, golden says %s", at, describe(golden)))
		} else if !seen.elem.empty() {
			if golden.elem.empty() {
				problems = append(problems, fmt.Sprintf("%s: array elements %s, golden has only empty arrays", at, describe(seen.elem)))
			} else {
				problems = append(problems, fits(seen.elem, golden.elem, path+"[]")...)
			}
		}
	}
	if seen.members != nil {
		if golden.members == nil {
			return append(problems, fmt.Sprintf("%s: an object, golden says %s", at, describe(golden)))
		}
		for _, k := range sortedKeys(seen.members) {
			g := golden.members[k]
			if g == nil {
				problems = append(problems, fmt.Sprintf("%s: key %q is not in the golden file", at, k))
				continue
			}
			problems = append(problems, fits(seen.members[k].shape, g.shape, strings.TrimPrefix(path+"."+k, "."))...)
		}
		for _, k := range sortedKeys(golden.members) {
			if golden.members[k].optional {
				continue
			}
			if m := seen.members[k]; m == nil || m.optional {
				problems = append(problems, fmt.Sprintf("%s: key %q is missing (the golden file says it is always present)", at, k))
			}
		}
	}
	return problems
}

func describe(s *shape) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(encodeShape(s))
	b := bytes.TrimSpace(buf.Bytes())
	if len(b) > 80 {
		b = append(b[:77], "..."...)
	}
	return string(b)
}

func sortedKeys(m map[string]*member) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// encodeShape writes a shape as the golden files hold it.
func encodeShape(s *shape) any {
	var alts []any
	for _, k := range scalarKinds {
		if s.scalars[k] {
			alts = append(alts, k)
		}
	}
	if s.elem != nil {
		if s.elem.empty() {
			alts = append(alts, []any{})
		} else {
			alts = append(alts, []any{encodeShape(s.elem)})
		}
	}
	if s.members != nil {
		obj := map[string]any{}
		for k, m := range s.members {
			if m.optional {
				k += "?"
			}
			obj[k] = encodeShape(m.shape)
		}
		alts = append(alts, obj)
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return map[string]any{"<oneof>": alts}
}

// decodeShape reads a shape back from a golden file.
func decodeShape(v any) (*shape, error) {
	switch v := v.(type) {
	case string:
		if !slices.Contains(scalarKinds, v) {
			return nil, fmt.Errorf("%q is not a type (want one of %v)", v, scalarKinds)
		}
		return &shape{scalars: map[string]bool{v: true}}, nil
	case []any:
		switch len(v) {
		case 0:
			return &shape{elem: &shape{}}, nil
		case 1:
			e, err := decodeShape(v[0])
			return &shape{elem: e}, err
		}
		return nil, fmt.Errorf("an array shape has one element, not %d", len(v))
	case map[string]any:
		if alts, ok := v["<oneof>"].([]any); ok && len(v) == 1 {
			var s *shape
			for _, alt := range alts {
				a, err := decodeShape(alt)
				if err != nil {
					return nil, err
				}
				s = merge(s, a)
			}
			return s, nil
		}
		s := &shape{members: map[string]*member{}}
		for k, e := range v {
			es, err := decodeShape(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			name, optional := strings.CutSuffix(k, "?")
			s.members[name] = &member{shape: es, optional: optional}
		}
		return s, nil
	}
	return nil, fmt.Errorf("%v is not a shape", v)
}

func readShape(path string) (*shape, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := decodeShape(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
