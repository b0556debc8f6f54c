package daemon_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// The dashboard (issue 14) in a real browser: Debian's headless Chromium
// loads each page from a running daemon that watches real programs, and
// the test reads the DOM the pages' scripts built. Screenshots go to the
// test's artefact directory (go test -artifacts), and to docs/dashboard
// with BPFPERF_UPDATE_SCREENSHOTS=1.

// browser runs headless Chromium on pages of one daemon's dashboard.
type browser struct {
	path, base string
	shots      []string // where screenshots go
}

func newBrowser(t *testing.T, base string) *browser {
	path, err := exec.LookPath("chromium")
	if err != nil {
		privtest.Skip(t, "chromium is not installed (sudo make deps installs Debian's chromium)")
	}
	b := &browser{path: path, base: base, shots: []string{t.ArtifactDir()}}
	if os.Getenv("BPFPERF_UPDATE_SCREENSHOTS") == "1" {
		b.shots = append(b.shots, "../docs/dashboard")
	}
	return b
}

// run runs Chromium on page (a path under the dashboard) with the flags
// given, letting the page's scripts run for 4 s of virtual time (fetches
// are real; timers jump ahead).
func (b *browser) run(t *testing.T, page string, flags ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=4000", "--window-size=1280,1000"}, flags...)
	cmd := exec.CommandContext(ctx, b.path, append(args, b.base+page)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v", page, err)
	}
	return out
}

// dom is the page's DOM once its scripts have run; with a name, a
// screenshot of it is saved as name.png in every screenshot directory.
func (b *browser) dom(t *testing.T, page, name string) string {
	t.Helper()
	if name == "" {
		return string(b.run(t, page, "--dump-dom"))
	}
	file := filepath.Join(t.TempDir(), name+".png")
	dom := string(b.run(t, page, "--dump-dom", "--screenshot="+file))
	png, err := os.ReadFile(file)
	if err != nil || len(png) < 1000 {
		t.Fatalf("screenshot of %s: %v (%d bytes)", page, err, len(png))
	}
	for _, dir := range b.shots {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dom
}

// TestDashboardInBrowser: the front page lists a running program and draws
// its chart, its program page draws the four charts, pprof's flame graph
// of the range has a frame for the hot function, and the profiles and
// benchmark pages list what the daemon stored.
func TestDashboardInBrowser(t *testing.T) {
	privtest.Root(t)
	web := freeAddr(t)
	d := startDaemon(t, t.TempDir(), "--web.listen-address", web, "--interval", "1s", "--profile.every", "2s")
	b := newBrowser(t, "http://"+web+"/")

	hot := spinHot(t)
	info, _ := hot.Info()
	pid, _ := info.ID()
	id := fmt.Sprint(pid)
	// A stored benchmark run with the tail-call chain curve and a map panel.
	d.cli(t, "bench", "--filter", `^(tailcall/chain=(1|8|16|32)|maps/(hash|array)/lookup/size=(1|1K)/keys=uniform)$`, "--target", "2ms", "--measures", "3", "--store", "--label", "dashboard test")

	// A profile window and a few sweeps with runs: the chart has points.
	var profiles []api.ProfileInfo
	eventuallyFor(t, 20*time.Second, "two continuous profile windows, the last with samples", func() bool {
		// Two windows: the sampled CPU % chart draws a point per window.
		return d.query(&profiles, "profile", "list") == nil && len(profiles) > 1 && profiles[len(profiles)-1].Samples > 0
	})

	// Three stored sweeps of the busy program: two rates to draw a line.
	eventuallyFor(t, 10*time.Second, "three stored sweeps of hot_entry", func() bool {
		var pts []api.HistoryPoint
		return d.query(&pts, "history", id, "--since", "1h") == nil && len(pts) >= 3
	})

	front := b.dom(t, "", "programs")
	if !strings.Contains(front, fmt.Sprintf(`<a href="program.html?prog=%s">hot_entry</a>`, id)) {
		t.Errorf("front page: no row linking hot_entry (id %s) to its page:\n%.3000s", id, front)
	}
	if !regexp.MustCompile(`id="stats-cost"[^>]*>bpf_stats on \d+% of the time.*; budget 1(\.00)?%`).MatchString(front) {
		t.Errorf("front page: no line saying what bpf_stats cost and the budget:\n%.3000s", front)
	}
	if n := chartPoints(t, front, `id="busiest"`); n < 2 {
		t.Errorf("front page: the busiest programs' chart drew %d points, want 2 or more", n)
	}

	prog := b.dom(t, "program.html?prog="+id, "program")
	if !strings.Contains(prog, "<h1>hot_entry ") {
		t.Errorf("program page: no hot_entry heading:\n%.3000s", prog)
	}
	if n := strings.Count(prog, "<canvas"); n != 4 {
		t.Errorf("program page: %d chart canvases, want 4 (ns/run, runs/s, CPU %%, sampled CPU %%)", n)
	}
	drawn := regexp.MustCompile(`class="chart" data-points="(\d+)"`).FindAllStringSubmatch(prog, -1)
	if len(drawn) != 4 {
		t.Errorf("program page: %d charts say what they drew, want 4", len(drawn))
	}
	for _, m := range drawn {
		if m[1] == "0" || m[1] == "1" {
			t.Errorf("program page: a chart drew %s points, want 2 or more", m[1])
		}
	}
	if strings.Contains(prog, `class="error"`) {
		t.Errorf("program page shows an error:\n%.3000s", prog)
	}
	// The test spins hot_entry itself: its samples are task context,
	// charged to the test's own cgroup.
	if !regexp.MustCompile(`<div id="triggers"><table>.*<td class="text">task</td>`).MatchString(prog) {
		t.Errorf("program page: no trigger table with a task-context row:\n%.3000s", prog)
	}
	src := regexp.MustCompile(`<iframe class="pprof" id="flamegraph" loading="lazy" src="([^"]+)"`).FindStringSubmatch(prog)
	if src == nil {
		t.Fatalf("program page: no flame graph frame")
	}
	flame := b.dom(t, strings.TrimPrefix(htmlUnescape(src[1]), "/"), "flamegraph")
	if !strings.Contains(flame, `<div class="boxtext">spin`) {
		t.Errorf("flame graph of the range: no frame for the hot function spin:\n%.2000s", flame)
	}

	profilesPage := b.dom(t, "profiles.html", "profiles")
	if !strings.Contains(profilesPage, fmt.Sprintf(`href="/ui/pprof/id/%s/flamegraph"`, profiles[len(profiles)-1].ID)) {
		t.Errorf("profiles page: no link to profile %s's flame graph", profiles[len(profiles)-1].ID)
	}
	benchPage := b.dom(t, "bench.html", "")
	run := regexp.MustCompile(`<a href="bench.html\?run=(\d+)">`).FindStringSubmatch(benchPage)
	if run == nil || !strings.Contains(benchPage, "dashboard test") {
		t.Fatalf("bench page: no stored run labelled 'dashboard test':\n%.2000s", benchPage)
	}
	runPage := b.dom(t, "bench.html?run="+run[1], "bench-run")
	if !strings.Contains(runPage, "tailcall/chain=16") || !regexp.MustCompile(`id="tailcalls".*<canvas`).MatchString(runPage) {
		t.Errorf("bench run page: no tail-call result or no chain-length chart:\n%.2000s", runPage)
	}
	if n := chartPoints(t, runPage, `id="tailcalls"`); n != 4 {
		t.Errorf("bench run page: the chain-length chart drew %d points, want 4 (chains of 1, 8, 16, 32)", n)
	}
	if n := chartPoints(t, runPage, `<div class="chart"`); n != 4 {
		t.Errorf("bench run page: the map panel drew %d points, want 4 (hash and array, 1 and 1K entries)", n)
	}
	if !strings.Contains(runPage, `<div class="u-title">lookup, uniform keys</div>`) {
		t.Errorf("bench run page: no 'lookup, uniform keys' map panel")
	}
	for _, bad := range []string{"base=" + run[1], "base=x&new=" + run[1], "base=999&new=" + run[1]} {
		if code, _, body := get(t, "http://"+web+"/v1/bench/compare?"+bad); code != 400 && code != 404 {
			t.Errorf("/v1/bench/compare?%s: %d %s, want 400 or 404", bad, code, body)
		}
	}
	// A run against itself: bench compare's table, nothing significant.
	same := b.dom(t, "bench.html?run="+run[1]+"&base="+run[1], "")
	if !regexp.MustCompile(`id="compare".*<td class="text">tailcall/chain=16</td>.*<td>\+0\.0%</td><td>1\.000</td><td class="text">~</td>`).MatchString(same) {
		t.Errorf("bench compare page: run %s against itself does not show tailcall/chain=16 unchanged (+0.0%%, p 1.000, ~):\n%.3000s", run[1], same)
	}

}

// chartPoints is the data-points of a chart (the element with attr): what
// uPlot drew, counted from its own drawSeries hook after drawing (lib.js
// drawnPlugin), not what the page fetched.
func chartPoints(t *testing.T, dom, attr string) int {
	t.Helper()
	m := regexp.MustCompile(attr + ` data-points="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Errorf("no chart %s in the page", attr)
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// htmlUnescape undoes the escaping of an attribute in a dumped DOM.
func htmlUnescape(s string) string {
	s = strings.ReplaceAll(s, "&amp;", "&")
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.String()
}
