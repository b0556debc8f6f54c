package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// benchArgs is the quickest real bench run: one empty socket filter.
var benchArgs = []string{"bench", "--quick", "--filter", "^baseline/socket_filter$"}

// TestBenchStore runs the real `bpfperf bench --store` against a real
// daemon: the run is listed, compared by id with the saved file, shows as
// an event, and survives a restart.
func TestBenchStore(t *testing.T) {
	privtest.Root(t)
	state := t.TempDir()
	d := startDaemon(t, state)
	saved := filepath.Join(t.TempDir(), "base.json")

	out, errOut, code := run(bin.cli, append([]string{"--socket", d.socket}, append(benchArgs, "--store", "--save", saved)...)...)
	if code != 0 || !strings.Contains(out, "baseline/socket_filter") || !strings.Contains(errOut, "stored as bench run 1") {
		t.Fatalf("bench --store: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}

	var runs []api.BenchRun
	d.json(t, &runs, "bench", "runs")
	if len(runs) != 1 {
		t.Fatalf("bench runs = %+v, want one run", runs)
	}
	r := runs[0]
	if r.ID != 1 || r.Tests != 1 || r.Failed != 0 || r.Kernel == "" || r.Label != "quick filter=^baseline/socket_filter$" || time.Since(r.Time) > time.Minute {
		t.Errorf("stored run = %+v", r)
	}
	if table := d.cli(t, "bench", "runs"); !strings.Contains(table, "quick filter=^baseline/socket_filter$") || !strings.HasPrefix(table, "ID") {
		t.Errorf("bench runs table:\n%s", table)
	}

	// The stored report is the one --save wrote.
	f, err := os.Open(saved)
	if err != nil {
		t.Fatal(err)
	}
	want, err := bench.ReadJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	client, err := api.Dial(d.socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, id, err := client.BenchReport("last")
	if err != nil || id != 1 {
		t.Fatalf("report of last: id %d, %v", id, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stored report differs from the saved one:\n%+v\n%+v", got, want)
	}

	// bench get writes the stored report back out, as the CLI saw it.
	fetched := filepath.Join(t.TempDir(), "got.json")
	if out, errOut, code := run(bin.cli, "--socket", d.socket, "bench", "get", "last", "--file", fetched); code != 0 {
		t.Fatalf("bench get: exit %d %s %s", code, out, errOut)
	}
	gf, err := os.Open(fetched)
	if err != nil {
		t.Fatal(err)
	}
	back, err := bench.ReadJSON(gf)
	gf.Close()
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("bench get last: %v, report differs from the saved one", err)
	}
	for _, c := range [][2]string{{"99", "unknown bench run 99"}, {"soon", "is not a run"}} {
		stdout, stderr, code := run(bin.cli, "--socket", d.socket, "bench", "get", c[0])
		oneLineError(t, "bench get "+c[0], stdout, stderr, code, c[1])
	}

	// Stored run against the file of the same run: the same samples, so
	// no change. Every way of naming the run gives the same answer.
	for _, base := range []string{"run:1", "1", "last", "run:last"} {
		var cmp bench.Comparison
		d.json(t, &cmp, "bench", "compare", base, saved)
		// Where a PMU exists bench counts events by default, and each is
		// compared too ("baseline/socket_filter [cycles/run]"): no change
		// in any of them either.
		ns := 0
		for _, dl := range cmp.Deltas {
			if dl.Test == "baseline/socket_filter" {
				ns++
				if dl.N1 != len(want.Results[0].Measurements()) {
					t.Errorf("compare %s %s: n %d", base, saved, dl.N1)
				}
			} else if !strings.HasPrefix(dl.Test, "baseline/socket_filter [") {
				t.Errorf("compare %s %s: unexpected test %q", base, saved, dl.Test)
			}
			if dl.Pct != 0 || dl.Significant {
				t.Errorf("compare %s %s: %+v", base, saved, dl)
			}
		}
		if ns != 1 {
			t.Errorf("compare %s %s = %+v", base, saved, cmp)
		}
	}

	// A run from elsewhere (another kernel, stats off) compares with a note.
	other := *want
	other.Fingerprint.Kernel, other.Fingerprint.Stats = "6.1.0", bench.StatsMode{Source: "off"}
	otherFile := filepath.Join(t.TempDir(), "other.json")
	if f, err := os.Create(otherFile); err == nil {
		bench.WriteJSON(f, &other)
		f.Close()
	}
	if out, errOut, code := run(bin.cli, "--socket", d.socket, "bench", "compare", "last", otherFile); code != 0 || !strings.Contains(errOut, "note: the runs differ in bpf_stats on") || !strings.Contains(errOut, "kernel "+want.Fingerprint.Kernel+" vs 6.1.0") {
		t.Errorf("compare with a run from another kernel, stats off: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}

	var events []api.Event
	eventually(t, "the bench_run event", func() bool {
		events = nil
		d.query(&events, "events", "--since", "5m")
		for _, e := range events {
			if e.Kind == "bench_run" && strings.HasPrefix(e.Detail, "run 1: 1 test") {
				return true
			}
		}
		return false
	})

	// A restart keeps the run, and ids go on from it.
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.stderr)
	}
	d = startDaemon(t, state)
	d.json(t, &runs, "bench", "runs")
	if len(runs) != 1 || runs[0].ID != 1 || !runs[0].Time.Equal(r.Time) {
		t.Fatalf("after a restart: bench runs = %+v, want %+v", runs, r)
	}
	out, errOut, code = run(bin.cli, append([]string{"--socket", d.socket}, append(benchArgs, "--store", "--label", "second", "-o", "json")...)...)
	if code != 0 || !strings.Contains(errOut, "stored as bench run 2") {
		t.Fatalf("second bench --store: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if _, err := bench.ReadJSON(strings.NewReader(out)); err != nil {
		t.Errorf("bench --store -o json: stdout is not the report alone: %v\n%s", err, out)
	}
	d.json(t, &runs, "bench", "runs", "--since", "1h")
	if len(runs) != 2 || runs[1].ID != 2 || runs[1].Label != "second" {
		t.Errorf("bench runs = %+v, want runs 1 and 2 (labelled second)", runs)
	}
	if table := d.cli(t, "bench", "compare", "last~1", "last"); !strings.Contains(table, "baseline/socket_filter") {
		t.Errorf("compare last~1 last:\n%s", table)
	}
	if out := d.cli(t, "store", "check"); !strings.Contains(out, "consistent") {
		t.Errorf("store check: %s", out)
	}
}

func TestBenchStoreBadInput(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir())
	saved := filepath.Join(t.TempDir(), "run.json")

	// No daemon: the results are printed and saved, then one line says
	// why they were not stored.
	noDaemon := filepath.Join(t.TempDir(), "none.sock")
	out, errOut, code := run(bin.cli, append([]string{"--socket", noDaemon}, append(benchArgs, "--store", "--save", saved)...)...)
	oneLineError(t, "bench --store without a daemon", out, errOut, code, "no bpfperfd running")
	if !strings.Contains(out, "baseline/socket_filter") {
		t.Errorf("bench --store without a daemon printed no results:\n%s", out)
	}
	if fi, err := os.Stat(saved); err != nil || fi.Size() == 0 {
		t.Fatalf("bench --store --save without a daemon saved nothing: %v", err)
	}

	client, err := api.Dial(d.socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	report, _ := os.ReadFile(saved)
	for _, c := range []struct {
		body, label, want string
	}{
		{"hello", "", "not a bench report"},
		{`{"time":"2026-11-21T10:00:00Z","results":[]}`, "", "no results"},
		{`{"time":"2026-11-21T10:00:00Z","results":[{"name":"x"}]} {}`, "", "after the JSON"},
		{`{"results":[{"name":"x"}]}`, "", "time"},
		{`{"time":"2026-11-21T10:00:00Z","results":[{"name":5}]}`, "", "results[0].name: want a string"},
		{`{"time":"2026-11-21T10:00:00Z","results":[{"name":"x","runs":[{"cpu":"0"}]}]}`, "", "results[0].runs[0].cpu: want a whole number"},
		{`{"time":"2026-11-21T10:00:00Z","results":[{"name":"x"}]}`, "", "results[0] (x): no measurements"},
		{`{"time":"2026-11-21T10:00:00Z","results":[{"name":"x","runs":[{"cpu":0,"measurements_ns":[5,-1]}]}]}`, "", "measurements_ns[1] is -1"},
		{`{"time":"2026-11-21T10:00:00Z","results":[{"name":"x","runs":[{"cpu":0,"measurements_ns":[1e308]}]}]}`, "", "is 1e+308: want 0 to"},
		{string(report), "two\nlines", "label"},
	} {
		if _, err := client.StoreBenchRun([]byte(c.body), c.label); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("store %.40q: %v, want an error about %q", c.body, err, c.want)
		}
	}
	if runs, err := client.BenchRuns(time.Now().Add(-time.Hour), time.Now()); err != nil || len(runs.Runs) != 0 {
		t.Errorf("refused reports were stored: %+v, %v", runs, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "runs"}, "no stored bench runs"},
		{[]string{"bench", "compare", "last", saved}, `unknown bench run "last": 0 runs are stored`},
		{[]string{"bench", "compare", "run:99", saved}, "unknown bench run 99"},
		{[]string{"bench", "compare", "run:x", saved}, `"x": want a run id`},
		{[]string{"bench", "compare", "run:last~x", saved}, "want last or last~N"},
		{[]string{"bench", "compare", "no-such-file", saved}, "not a stored run"},
		{[]string{"bench", "plot", "run:7"}, "unknown bench run 7"},
		{[]string{"bench", "runs", "--since", "2h", "--until", "3h"}, "is not after --since"},
		{[]string{"bench", "runs", "-o", "yaml"}, `-o "yaml"`},
		{[]string{"bench", "--label", "x"}, "--label needs --store"},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, "bpfperf "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
	// Stored runs need the daemon; files do not.
	stdout, stderr, code := run(bin.cli, "--socket", noDaemon, "bench", "compare", "last", saved)
	oneLineError(t, "compare of a stored run without a daemon", stdout, stderr, code, "no bpfperfd running")
	if out, errOut, code := run(bin.cli, "--socket", noDaemon, "bench", "compare", saved, saved); code != 0 {
		t.Errorf("compare of two files without a daemon: exit %d: %s\n%s", code, errOut, out)
	}
}

// TestBenchCounters: `bpfperf bench --counters.events cpu-clock` counts per
// run in every output and stores it; `--counters` names the missing PMU in
// one line where there is none (and counts where there is one); a bad
// event name is one line.
func TestBenchCounters(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir())
	args := append(append([]string{"--socket", d.socket}, benchArgs...), "--counters.events", "cpu-clock")
	out, errOut, code := run(bin.cli, append(args, "-o", "json", "--store")...)
	if code != 0 {
		t.Fatalf("bench --counters.events cpu-clock: exit %d: %s", code, errOut)
	}
	var rep struct {
		Config  struct{ Events []string }
		Results []struct {
			Name   string
			Events map[string]struct {
				N      int     `json:"n"`
				Median float64 `json:"median_ns"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Config.Events) != 1 || len(rep.Results) == 0 || rep.Results[0].Events["cpu-clock"].Median <= 0 {
		t.Fatalf("report: %+v", rep)
	}
	table, errOut, code := run(bin.cli, append(args, "-o", "table")...)
	if code != 0 || !strings.Contains(table, "cpu-clock/run") {
		t.Errorf("table: exit %d %s\n%s", code, errOut, table)
	}
	stored := d.cli(t, "bench", "get", "last", "-o", "gobench")
	if !strings.Contains(stored, "cpu-clock/op") {
		t.Errorf("stored run as gobench has no cpu-clock/op:\n%s", stored)
	}

	// Which case this is, judged apart from bpfperf (privtest.NoPMU).
	out, errOut, code = run(bin.cli, append(append([]string{"--socket", d.socket}, benchArgs...), "--counters")...)
	if privtest.NoPMU(t) != "" {
		oneLineError(t, "bench --counters without a PMU", out, errOut, code, "no hardware PMU")
	} else if code != 0 || !strings.Contains(out, "cycles/run") || !strings.Contains(out, "IPC") {
		t.Errorf("bench --counters with a PMU: exit %d %s\n%s", code, errOut, out)
	}
	out, errOut, code = run(bin.cli, append(append([]string{"--socket", d.socket}, benchArgs...), "--counters.events", "bogus")...)
	oneLineError(t, "bench --counters.events bogus", out, errOut, code, "--counters.events")
}
