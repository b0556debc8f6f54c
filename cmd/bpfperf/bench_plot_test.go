package main

import (
	"bytes"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// The bench plot tests run the real binary on saved reports: fixtures
// with the suite's tail-call and map tests and made-up medians (the
// drawing itself is tested in package bench).

// plotFixture is a report of the suite's tests of groups on kernel, taken
// at t, with medians that grow with chain length and map size, scaled by
// slow.
func plotFixture(kernel string, t time.Time, slow float64, groups ...string) *bench.Report {
	rep := &bench.Report{Time: t, Fingerprint: bench.Fingerprint{Kernel: kernel}}
	for _, test := range bench.Suite() {
		if !slices.Contains(groups, test.Group) {
			continue
		}
		chain, _ := strconv.Atoi(test.Labels["chain"])
		size, _ := strconv.Atoi(test.Labels["size"])
		m := slow * (40 + 12*float64(chain) + 5*math.Log2(float64(size+1)))
		rep.Results = append(rep.Results, bench.Result{
			Test:    test,
			Runs:    []bench.CPURun{{Measurements: []float64{m}, Summary: bench.Summarize([]float64{m})}},
			Summary: bench.Summarize([]float64{m}),
		})
	}
	return rep
}

func saveReport(t *testing.T, path string, rep *bench.Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := bench.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// svgTexts parses an SVG file as XML and returns its texts.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name
		Texts   []string `xml:"g>text"`
		Rotated []string `xml:"g>g>text"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || doc.XMLName.Local != "svg" {
		t.Fatalf("%s: not SVG (%v, root %q)", path, err, doc.XMLName.Local)
	}
	return append(doc.Texts, doc.Rotated...)
}

func count(texts []string, s string) int {
	n := 0
	for _, t := range texts {
		if t == s {
			n++
		}
	}
	return n
}

// TestBenchPlotReports: two saved reports draw one line each on
// tailcalls.svg, named by kernel; two on one kernel are told apart by
// file; bad input is one line and a non-zero exit.
func TestBenchPlotReports(t *testing.T) {
	buildTop(t)
	dir := t.TempDir()
	now := time.Now().UTC()
	newer := saveReport(t, filepath.Join(dir, "new.json"), plotFixture("6.18.44-fc", now, 1, "tailcall", "maps"))
	older := saveReport(t, filepath.Join(dir, "old.json"), plotFixture("6.1.0-test", now, 1.3, "tailcall", "maps"))
	same := saveReport(t, filepath.Join(dir, "same.json"), plotFixture("6.18.44-fc", now, 1.1, "tailcall"))

	out := t.TempDir()
	stdout, stderr, code := privtest.Exec(topBin.cli, "bench", "plot", "--dir", out, newer, older)
	tailSVG, mapsSVG := filepath.Join(out, "tailcalls.svg"), filepath.Join(out, "maps.svg")
	if code != 0 || stdout != "wrote "+tailSVG+"\nwrote "+mapsSVG+"\n" || stderr != "" {
		t.Fatalf("bench plot new old: exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}
	tail := svgTexts(t, tailSVG)
	for _, s := range []string{"6.18.44-fc", "6.1.0-test", "tail calls: ns per run vs chain length (kernel limit 33)", "ns/run (median)"} {
		if count(tail, s) != 1 {
			t.Errorf("tailcalls.svg: %q %d times, want once; texts %q", s, count(tail, s), tail)
		}
	}
	maps := svgTexts(t, mapsSVG)
	if count(maps, "lookup, zipf keys: 6.1.0-test") != 1 || count(maps, "lookup, zipf keys: 6.18.44-fc") != 1 {
		t.Errorf("maps.svg: no panel per report: %q", maps)
	}

	// One kernel twice, and a report with tail calls only: the lines are
	// named by file, and maps.svg has the one report that has maps.
	stdout, stderr, code = privtest.Exec(topBin.cli, "bench", "plot", "--dir", out, newer, same)
	if code != 0 || !strings.Contains(stdout, "maps.svg") {
		t.Fatalf("bench plot new same: exit %d\n%s%s", code, stdout, stderr)
	}
	tail = svgTexts(t, tailSVG)
	if count(tail, "6.18.44-fc, "+newer) != 1 || count(tail, "6.18.44-fc, "+same) != 1 {
		t.Errorf("tailcalls.svg of two runs on one kernel: %q", tail)
	}
	if maps = svgTexts(t, mapsSVG); count(maps, "lookup, zipf keys: 6.18.44-fc, "+newer) != 1 {
		t.Errorf("maps.svg: %q", maps)
	}

	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("not a report\n"), 0o600)
	baseline := saveReport(t, filepath.Join(dir, "baseline.json"), plotFixture("6.18.44-fc", now, 1, "baseline"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "needs one REPORT or more"},
		{[]string{newer, filepath.Join(dir, "missing.json")}, "missing.json: no such file, and not a stored run"},
		{[]string{garbage}, "garbage.json: line 1: invalid character"},
		{[]string{dir}, "is a directory"},
		{[]string{newer, baseline}, "nothing to plot: " + baseline + " has no tail-call or map results"},
		{[]string{"--dir", filepath.Join(dir, "no", "such"), newer}, "no such file or directory"},
	} {
		args := append([]string{"bench", "plot", "--dir", t.TempDir()}, c.args...)
		stdout, stderr, code := privtest.Exec(topBin.cli, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code == 0 || len(lines) != 1 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestBenchPlotStoredRuns: stored runs plot like files, each line named by
// kernel, then by the run's label and id where kernels tie.
func TestBenchPlotStoredRuns(t *testing.T) {
	privtest.Root(t)
	buildTop(t)
	d := startTopDaemon(t, t.TempDir())
	c := d.client(t)
	now := time.Now().UTC().Truncate(time.Second)
	for i, label := range []string{"nightly", "pr-1"} {
		var buf bytes.Buffer
		bench.WriteJSON(&buf, plotFixture("6.18.44-fc", now.Add(time.Duration(i-2)*time.Minute), 1+float64(i)/10, "tailcall"))
		if _, err := c.StoreBenchRun(buf.Bytes(), label); err != nil {
			t.Fatal(err)
		}
	}
	file := saveReport(t, filepath.Join(t.TempDir(), "other.json"), plotFixture("6.1.0-test", now, 1.3, "tailcall"))

	out := t.TempDir()
	stdout, stderr, code := privtest.Exec(topBin.cli, "--socket", d.socket, "bench", "plot", "--dir", out, "last~1", "run:2", file)
	if code != 0 || stdout != "wrote "+filepath.Join(out, "tailcalls.svg")+"\n" {
		t.Fatalf("bench plot last~1 run:2 FILE: exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}
	tail := svgTexts(t, filepath.Join(out, "tailcalls.svg"))
	for _, s := range []string{"6.18.44-fc, nightly (run 1)", "6.18.44-fc, pr-1 (run 2)", "6.1.0-test"} {
		if count(tail, s) != 1 {
			t.Errorf("tailcalls.svg: legend %q %d times, want once; texts %q", s, count(tail, s), tail)
		}
	}
	stdout, stderr, code = privtest.Exec(topBin.cli, "--socket", d.socket, "bench", "plot", "--dir", out, "last", "run:7")
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); code == 0 || len(lines) != 1 || !strings.Contains(stderr, "unknown bench run 7") || stdout != "" {
		t.Errorf("plot of an unknown run: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}
