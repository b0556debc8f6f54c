package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/top"
)

// The top tests run the real binaries: bpfperfd against the real kernel,
// and `bpfperf top` inside tmux, read back with capture-pane.
var topBin struct {
	once        sync.Once
	dir         string
	daemon, cli string
	err         error
}

func TestMain(m *testing.M) {
	if os.Getenv(getppidEnv) != "" {
		getppidHelper()
	}
	os.Setenv("BPFPERF_HOST_LOCK", "none") // daemons of their own, beside any other
	code := m.Run()
	if topBin.dir != "" {
		os.RemoveAll(topBin.dir)
	}
	os.Exit(code)
}

// buildTop builds bin/bpfperfd and bin/bpfperf once, for the tests that
// need them.
func buildTop(tb testing.TB) {
	tb.Helper()
	topBin.once.Do(func() {
		if topBin.dir, topBin.err = os.MkdirTemp("", "bpfperf-top-"); topBin.err != nil {
			return
		}
		topBin.daemon, topBin.cli = filepath.Join(topBin.dir, "bpfperfd"), filepath.Join(topBin.dir, "bpfperf")
		for out, pkg := range map[string]string{topBin.daemon: "../bpfperfd", topBin.cli: "."} {
			if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				topBin.err = fmt.Errorf("build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	if topBin.err != nil {
		tb.Fatal(topBin.err)
	}
}

type topDaemon struct {
	cmd    *exec.Cmd
	dir    string
	socket string
	stderr *bytes.Buffer
	done   chan error
}

// startTopDaemon runs bpfperfd on dir (default interval 200 ms; args may
// override it) and waits until its API answers.
func startTopDaemon(tb testing.TB, dir string, args ...string) *topDaemon {
	// The daemon holds stats on: keep stats-sensitive tests of other
	// packages from running meanwhile.
	privtest.LockStats(tb)
	tb.Helper()
	d := &topDaemon{dir: dir, socket: filepath.Join(dir, "api.sock"), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(topBin.daemon, append([]string{"--state-dir", dir, "--socket", d.socket, "--interval", "200ms", "--log-level", "warn"}, args...)...)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	tb.Cleanup(func() { d.stop() })
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := api.Dial(d.socket, time.Second); err == nil {
			if _, err := c.Status(); err == nil {
				return d
			}
		}
		select {
		case err := <-d.done:
			d.done <- err
			tb.Fatalf("bpfperfd exited early: %v\n%s", err, d.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	tb.Fatalf("bpfperfd did not answer in 10s\n%s", d.stderr)
	return nil
}

func (d *topDaemon) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
	}
}

func (d *topDaemon) client(tb testing.TB) *api.Client {
	tb.Helper()
	c, err := api.Dial(d.socket, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// tmuxTop runs `bpfperf top` in a private tmux server (its own socket, no
// config) at size w x h.
type tmuxTop struct {
	server string
}

func startTmux(tb testing.TB, w, h int, args ...string) *tmuxTop {
	tb.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		privtest.Skip(tb, "tmux not installed (apt-get install tmux)")
	}
	tm := &tmuxTop{server: fmt.Sprintf("bpfperf-top-%d-%d", os.Getpid(), time.Now().UnixNano())}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	// exec, so the pane's pid is bpfperf's; keep the pane when it exits so a
	// failure shows its last words.
	cmd := "exec " + topBin.cli + " " + strings.Join(quoted, " ")
	tm.run(tb, "new-session", "-d", "-s", "top", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), cmd)
	tm.run(tb, "set-option", "-t", "top", "remain-on-exit", "on")
	tb.Cleanup(func() { exec.Command("tmux", "-L", tm.server, "kill-server").Run() })
	return tm
}

func (tm *tmuxTop) run(tb testing.TB, args ...string) string {
	tb.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", tm.server, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "LANG=C.UTF-8", "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (tm *tmuxTop) screen(tb testing.TB) string { return tm.run(tb, "capture-pane", "-p", "-t", "top") }

func (tm *tmuxTop) keys(tb testing.TB, keys ...string) {
	tm.run(tb, append([]string{"send-keys", "-t", "top"}, keys...)...)
}

func (tm *tmuxTop) pid(tb testing.TB) int {
	pid, err := strconv.Atoi(strings.TrimSpace(tm.run(tb, "display", "-p", "-t", "top", "#{pane_pid}")))
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}

// waitFor polls the screen every 100 ms for up to 10 s until ok accepts it.
func (tm *tmuxTop) waitFor(t *testing.T, what string, ok func(screen string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := tm.screen(t)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; screen:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}
}

// rowOrder returns the names among names in the order the screen lists them.
func rowOrder(screen string, names ...string) []string {
	var out []string
	for _, l := range strings.Split(screen, "\n") {
		for _, n := range names {
			if strings.Contains(l, " "+n+" ") {
				out = append(out, n)
			}
		}
	}
	return out
}

// progLine finds the table line of the program named name.
func progLine(screen, name string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, " "+name+" ") {
			return l
		}
	}
	return ""
}

type loaded struct {
	prog *ebpf.Program
	id   uint32
	name string
}

func load(t *testing.T, name string, loop bool) loaded {
	t.Helper()
	var p *ebpf.Program
	var err error
	if loop {
		p, err = privtest.LoadLoop(name, 200)
	} else {
		p, err = privtest.LoadSocketFilter(name)
	}
	return loaded{p, privtest.Keep(t, p, err), name}
}

// TestTopLive drives `bpfperf top` in tmux against a daemon watching three
// known programs: one that ran only before top started (so its chart must
// come from the store), and two that run all along at different rates.
func TestTopLive(t *testing.T) {
	privtest.Root(t)
	buildTop(t)
	d := startTopDaemon(t, t.TempDir())
	c := d.client(t)

	prefix := fmt.Sprintf("t%06d_", time.Now().UnixNano()%1_000_000)
	a, b, cc := load(t, prefix+"a", true), load(t, prefix+"b", false), load(t, prefix+"c", false)
	// a runs for three seconds, a second after it was loaded, then stops:
	// the runs land in several history points however the chart's steps
	// fall.
	const runsA = 3000
	time.Sleep(time.Second)
	for i := 0; i < 10; i++ {
		if err := privtest.Run(a.prog, runsA/10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// b runs about ten times as often as c, from now until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			privtest.Run(b.prog, 20)
			privtest.Run(cc.prog, 2)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitAPI(t, c, "the daemon to see every run of a", func(rows []api.ProgRow) bool {
		r := find(rows, a.id)
		return r != nil && r.RunCnt == runsA
	})
	time.Sleep(500 * time.Millisecond) // a few samples with a idle

	t.Run("once json matches the API", func(t *testing.T) {
		before, err := c.Progs(false)
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runCLI("--socket", d.socket, "top", "--once", "-d", "500ms", "-o", "json", "--filter", prefix)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		after, err := c.Progs(false)
		if err != nil {
			t.Fatal(err)
		}
		var rep top.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		host, _ := os.Hostname()
		if rep.Host != host || rep.StatsMode == "" || rep.Kernel == "" || rep.Daemon.RSSBytes == 0 {
			t.Errorf("header host %q kernel %q stats %q rss %d", rep.Host, rep.Kernel, rep.StatsMode, rep.Daemon.RSSBytes)
		}
		if len(rep.Programs) != 3 {
			t.Fatalf("want the 3 programs named %s*, got %d:\n%s", prefix, len(rep.Programs), out)
		}
		got := map[uint32]top.ReportRow{}
		for _, r := range rep.Programs {
			got[r.ID] = r
		}
		for _, p := range []loaded{a, b, cc} {
			r, ok := got[p.id]
			api0, api1 := find(before, p.id), find(after, p.id)
			if !ok || api0 == nil || api1 == nil {
				t.Fatalf("%s (id %d) missing: report %v, api %v %v", p.name, p.id, ok, api0 != nil, api1 != nil)
			}
			if r.Name != api1.Name || r.Type != api1.Type || r.Tag != api1.Tag || r.Type != "socket_filter" || r.BootID != api1.BootID || !r.LoadedAt.Equal(api1.LoadedAt) {
				t.Errorf("%s: name %q type %q tag %q boot %q, API says %q %q %q %q", p.name, r.Name, r.Type, r.Tag, r.BootID, api1.Name, api1.Type, api1.Tag, api1.BootID)
			}
			if r.RunCnt < api0.RunCnt || r.RunCnt > api1.RunCnt || r.RunTimeNs < api0.RunTimeNs || r.RunTimeNs > api1.RunTimeNs {
				t.Errorf("%s: run_cnt %d run_time_ns %d outside the API's %d..%d and %d..%d", p.name, r.RunCnt, r.RunTimeNs, api0.RunCnt, api1.RunCnt, api0.RunTimeNs, api1.RunTimeNs)
			}
			if r.PeriodMs < 150 || r.PeriodMs > 2000 {
				t.Errorf("%s: period %v ms, want about the -d 500ms between two 200 ms daemon samples", p.name, r.PeriodMs)
			}
			if want := float64(r.RunTimeNs) / float64(r.RunCnt); r.AvgNsSinceLoad == nil || *r.AvgNsSinceLoad != want {
				t.Errorf("%s: avg since load %v, want %v", p.name, r.AvgNsSinceLoad, want)
			}
		}
		ra, rb, rc := got[a.id], got[b.id], got[cc.id]
		if ra.RunCnt != runsA || ra.RunsPerSec == nil || *ra.RunsPerSec != 0 || ra.CPUPercent == nil || *ra.CPUPercent != 0 || ra.AvgNsPerRun != nil {
			t.Errorf("idle a: run_cnt %d runs/s %v cpu %v avg %v; want %d, 0, 0, none", ra.RunCnt, ra.RunsPerSec, ra.CPUPercent, ra.AvgNsPerRun, runsA)
		}
		// b runs 20 times per ~20 ms loop turn (at most 1,000 a second),
		// c a tenth as often in the same loop. How many turns a loaded
		// host gives the loop is not this test's business: it checks the
		// ceiling and the ratio, which load changes alike for both.
		if rb.RunsPerSec == nil || *rb.RunsPerSec <= 0 || *rb.RunsPerSec > 1100 || rc.RunsPerSec == nil || *rb.RunsPerSec < 5**rc.RunsPerSec {
			t.Errorf("runs/s b %v c %v: want b above 0, at most 1100, and about 10x c", rb.RunsPerSec, rc.RunsPerSec)
		}
		for _, r := range []top.ReportRow{rb, rc} {
			if r.AvgNsPerRun == nil || r.CPUPercent == nil || *r.AvgNsPerRun <= 0 || *r.CPUPercent <= 0 || *r.CPUPercent > 100 {
				t.Errorf("%s: avg %v cpu %v", r.Name, r.AvgNsPerRun, r.CPUPercent)
			}
			if got, want := *r.CPUPercent, *r.RunsPerSec**r.AvgNsPerRun/1e7; got < want*0.999 || got > want*1.001 {
				t.Errorf("%s: cpu %v%% is not runs/s x avg (%v%%)", r.Name, got, want)
			}
		}

		csv, errOut, code := runCLI("--socket", d.socket, "top", "--once", "-d", "300ms", "-o", "csv", "--filter", prefix, "--sort", "name")
		if code != 0 {
			t.Fatalf("csv: exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(csv), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "id,type,name,runs_per_sec,") || !strings.HasPrefix(lines[1], fmt.Sprintf("%d,socket_filter,%s,0,,", a.id, a.name)) {
			t.Errorf("csv:\n%s", csv)
		}
		tbl, _, code := runCLI("--socket", d.socket, "top", "--once", "-d", "300ms", "--filter", prefix, "--sort", "name")
		if code != 0 || !strings.HasPrefix(tbl, "host ") || !regexp.MustCompile(fmt.Sprintf(`(?m)^%d +socket_filter +%s +0 +- +[0-9.]+ [nµ]s +0\.00%%`, a.id, a.name)).MatchString(tbl) {
			t.Errorf("table:\n%s", tbl)
		}
	})

	tm := startTmux(t, 160, 40, "--socket", d.socket, "top", "-d", "300ms", "--filter", prefix)
	names := []string{a.name, b.name, cc.name}

	t.Run("rows", func(t *testing.T) {
		s := tm.waitFor(t, "the three programs with rates", func(s string) bool {
			return len(rowOrder(s, names...)) == 3 && regexp.MustCompile(`[0-9.]+%`).MatchString(progLine(s, b.name))
		})
		t.Logf("table:\n%s", s)
		host, _ := os.Hostname()
		if !threeShown(s) {
			t.Errorf("screen does not say 3 programs are shown:\n%s", s)
		}
		for _, want := range []string{"host " + host, "stats fd", "BPF CPU ", "bpfperfd ", `filter "` + prefix + `"`, "every 300ms"} {
			if !strings.Contains(s, want) {
				t.Errorf("screen lacks %q:\n%s", want, s)
			}
		}
		// a is idle: 0 runs/s, no avg/run, its lifetime average, 0% CPU,
		// no maps (the MAPS column shows where some program has maps),
		// owned by this test process.
		comm, _ := os.ReadFile("/proc/self/comm")
		line := progLine(s, a.name)
		want := fmt.Sprintf(`^[ >] +%d +socket_filter +%s +0 +- +[0-9.]+ [nµ]s +0\.00%%( +-)? +%s/%d `, a.id, a.name, regexp.QuoteMeta(strings.TrimSpace(string(comm))), os.Getpid())
		if !regexp.MustCompile(want).MatchString(line) {
			t.Errorf("a's row %q does not match %s", line, want)
		}
		if !regexp.MustCompile(fmt.Sprintf(`^[ >] +%d +socket_filter +%s +[0-9.]+k? +[0-9.]+ [nµ]s`, b.id, b.name)).MatchString(progLine(s, b.name)) {
			t.Errorf("b's row: %q", progLine(s, b.name))
		}
	})

	t.Run("sort keys", func(t *testing.T) {
		tm.keys(t, "3") // NAME
		tm.waitFor(t, "name order", func(s string) bool {
			return fmt.Sprint(rowOrder(s, names...)) == fmt.Sprint([]string{a.name, b.name, cc.name}) && strings.Contains(s, "NAME▼")
		})
		tm.keys(t, "r")
		tm.waitFor(t, "reversed name order", func(s string) bool {
			return fmt.Sprint(rowOrder(s, names...)) == fmt.Sprint([]string{cc.name, b.name, a.name}) && strings.Contains(s, "NAME▲")
		})
		tm.keys(t, ">") // RUNS/S, highest first: b, c, a
		tm.waitFor(t, "runs/s order", func(s string) bool {
			return fmt.Sprint(rowOrder(s, names...)) == fmt.Sprint([]string{b.name, cc.name, a.name}) && strings.Contains(s, "sort runs ↓")
		})
	})

	t.Run("filter as you type", func(t *testing.T) {
		tm.keys(t, "/", "b")
		tm.waitFor(t, "only b", func(s string) bool {
			return fmt.Sprint(rowOrder(s, names...)) == fmt.Sprint([]string{b.name}) && strings.Contains(s, "(1 shown)") && strings.Contains(s, "filter: "+b.name)
		})
		tm.keys(t, "BSpace", "Enter")
		tm.waitFor(t, "all three again", func(s string) bool { return len(rowOrder(s, names...)) == 3 })
	})

	t.Run("select shows charts from history", func(t *testing.T) {
		tm.keys(t, "3", "Home", "Enter") // by name: a first
		s := tm.waitFor(t, "a's charts", contains(fmt.Sprintf("%s  id %d · socket_filter · tag ", a.name, a.id), "runs/s  now 0  max ", "-5m", "xlated "))
		t.Logf("charts:\n%s", s)
		// a has not run since top started: a non-zero maximum can only come
		// from points the store had before the session.
		m := regexp.MustCompile(`runs/s  now 0  max ([0-9.]+)(k?)`).FindStringSubmatch(s)
		if m == nil || m[1] == "0" {
			t.Errorf("a's runs/s chart has no earlier runs:\n%s", s)
		}
		if !strings.ContainsAny(s, "⣀⣤⣶⣿⡇⢸") {
			t.Errorf("no chart drawn:\n%s", s)
		}
		detail, err := c.Show(strconv.FormatUint(uint64(a.id), 10))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("xlated %d B · jited %d B", detail.Meta.BytesXlated, detail.Meta.BytesJited); !strings.Contains(s, want) || !strings.Contains(s, "tag "+detail.Tag) {
			t.Errorf("metadata lacks %q:\n%s", want, s)
		}
		tm.keys(t, "w")
		tm.waitFor(t, "a 15 minute window", contains("window 15m", "-15m"))
	})

	t.Run("resize", func(t *testing.T) {
		tm.run(t, "resize-window", "-t", "top", "-x", "50", "-y", "8")
		tm.waitFor(t, "the too-small message", contains("terminal too small (need 60x10, have 50x8)"))
		tm.run(t, "resize-window", "-t", "top", "-x", "100", "-y", "30")
		s := tm.waitFor(t, "the charts again", contains(a.name+"  id ", "runs/s  now 0"))
		for _, l := range strings.Split(s, "\n") {
			if n := len([]rune(l)); n > 100 {
				t.Errorf("line of %d columns in a 100 column window: %q", n, l)
			}
		}
		tm.keys(t, "Escape")
		tm.waitFor(t, "the table", func(s string) bool { return len(rowOrder(s, names...)) == 3 })
	})

	t.Run("daemon stops and comes back", func(t *testing.T) {
		d.stop()
		tm.waitFor(t, "disconnected", contains("disconnected, retrying"))
		startTopDaemon(t, d.dir)
		s := tm.waitFor(t, "recovery", func(s string) bool {
			return !strings.Contains(s, "disconnected") && len(rowOrder(s, names...)) == 3
		})
		if !threeShown(s) {
			t.Errorf("after recovery:\n%s", s)
		}
	})

	t.Run("quit", func(t *testing.T) {
		tm.keys(t, "q")
		tm.waitFor(t, "top to exit", func(string) bool {
			return strings.TrimSpace(tm.run(t, "display", "-p", "-t", "top", "#{pane_dead}")) == "1"
		})
	})
}

// threeShown: the status line counts our three programs (other tests may
// have programs loaded too, which the filter hides).
func threeShown(screen string) bool {
	return regexp.MustCompile(`(?m)^(3 programs|[0-9]+ programs \(3 shown\)) ·`).MatchString(screen)
}

func find(rows []api.ProgRow, id uint32) *api.ProgRow {
	for i := range rows {
		if rows[i].ID == id {
			return &rows[i]
		}
	}
	return nil
}

func waitAPI(t *testing.T, c *api.Client, what string, ok func([]api.ProgRow) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := c.Progs(false)
		if err == nil && ok(rows) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last error %v)", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTopBadInput runs the real binary: each bad input is one line naming
// the problem, and exit status 1, before any daemon is needed.
func TestTopBadInput(t *testing.T) {
	buildTop(t)
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "--sort", "speed"}, `--sort: unknown sort column "speed": want one of id, type, name,`},
		{[]string{"top", "-d", "0"}, `-d "0": bad refresh interval 0s: want 100ms to 1h0m0s`},
		{[]string{"top", "-d", "-1s"}, `-d "-1s": bad refresh interval -1s`},
		{[]string{"top", "-d", "soon"}, `-d "soon": not a duration like 500ms or 2s`},
		{[]string{"top", "--once", "-o", "xml"}, `-o "xml": want table, json or csv`},
		{[]string{"top", "extra"}, `top: unexpected argument "extra"`},
		{[]string{"top", "--once"}, "no bpfperfd running: socket " + sock + " does not exist"},
	} {
		out, errOut, code := runCLI(append([]string{"--socket", sock}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 1 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "bpfperf: ") || !strings.Contains(lines[0], c.want) {
			t.Errorf("bpfperf %s: exit %d, stdout %q, stderr %q; want one line with %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
	// Not a terminal: the live view refuses and points at --once.
	_, errOut, code := runCLI("--socket", sock, "top")
	if code != 1 || !strings.Contains(errOut, "not a terminal; use --once") {
		t.Errorf("top without a terminal: exit %d: %s", code, errOut)
	}
}

// TestTopParseDelay checks -d accepts durations and top-style seconds.
func TestTopParseDelay(t *testing.T) {
	for in, want := range map[string]time.Duration{"1s": time.Second, "300ms": 300 * time.Millisecond, "2": 2 * time.Second, "0.5": 500 * time.Millisecond} {
		if got, err := parseDelay(in); err != nil || got != want {
			t.Errorf("parseDelay(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "50ms", "2h", "x", ""} {
		if _, err := parseDelay(in); err == nil {
			t.Errorf("parseDelay(%q) accepted", in)
		}
	}
	if _, err := parseDelay("0"); !errors.Is(err, top.ErrBadInterval) {
		t.Errorf("parseDelay(0) = %v, want ErrBadInterval", err)
	}
}

// BenchmarkTopCPU1000 measures the CPU `bpfperf top -d 1s` uses, as the
// real binary in tmux (200x50), against a daemon sampling 1,000 loaded
// programs every second: utime+stime from /proc over 20 s (set
// BPFPERF_TOP_BENCH_SECONDS to change), after a 3 s warm-up.
func BenchmarkTopCPU1000(b *testing.B) {
	privtest.Root(b)
	buildTop(b)
	for i := 0; i < 1000; i++ {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("topcpu_%04d", i))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
	}
	d := startTopDaemon(b, b.TempDir(), "--interval", "1s")
	tm := startTmux(b, 200, 50, "--socket", d.socket, "top", "-d", "1s")
	deadline := time.Now().Add(15 * time.Second)
	for !regexp.MustCompile(`(?m)^[0-9]{4,} programs`).MatchString(tm.screen(b)) {
		if time.Now().After(deadline) {
			b.Fatalf("top does not show 1,000 programs:\n%s", tm.screen(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
	secs := 20
	if s, err := strconv.Atoi(os.Getenv("BPFPERF_TOP_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	pid := tm.pid(b)
	time.Sleep(3 * time.Second)
	b.ResetTimer()
	cli0, d0, t0 := cpuTicks(b, pid), cpuTicks(b, d.cmd.Process.Pid), time.Now()
	time.Sleep(time.Duration(secs) * time.Second)
	cli1, d1, t1 := cpuTicks(b, pid), cpuTicks(b, d.cmd.Process.Pid), time.Now()
	b.StopTimer()
	wall := t1.Sub(t0).Seconds()
	// USER_HZ is 100 on every Linux architecture Go supports.
	b.ReportMetric(float64(cli1-cli0)/100/wall*100, "cpu-%")
	b.ReportMetric(float64(d1-d0)/100/wall*100, "daemon-cpu-%")
	if s := tm.screen(b); !strings.Contains(s, "topcpu_") {
		b.Errorf("top stopped showing the programs:\n%s", s)
	}
	tm.keys(b, "q")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if strings.TrimSpace(tm.run(b, "display", "-p", "-t", "top", "#{pane_dead}")) == "1" {
			break
		}
	}
}

// cpuTicks is utime+stime of pid in clock ticks.
func cpuTicks(tb testing.TB, pid int) uint64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return utime + stime
}

// runCLI runs the built CLI and returns stdout, stderr and the exit code.
func runCLI(args ...string) (string, string, int) { return privtest.Exec(topBin.cli, args...) }
