package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/profile"
)

// The stat tests run the real binary on commands that drive real
// programs: bpftool's test run, and bpftrace's own program.

// statJSON runs `bpfperf stat -o json ARGS` and decodes the report. The
// report has stdout to itself: all of it must parse as one JSON value,
// whatever the command printed (its stdout goes to stderr).
func statJSON(t *testing.T, args ...string) (rep *bench.Report, stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code = privtest.Exec(topBin.cli, append([]string{"stat", "-o", "json"}, args...)...)
	if strings.TrimSpace(stdout) == "" {
		t.Fatalf("stat %q: exit %d, no report:\n%s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), new(any)); err != nil {
		t.Fatalf("stat %q: stdout is not one JSON value: %v\n%s", args, err, stdout)
	}
	rep, err := bench.ReadJSON(strings.NewReader(stdout))
	if err != nil {
		t.Fatalf("stat %q: %v\n%s", args, err, stdout)
	}
	return rep, stdout, stderr, code
}

func macroOf(t *testing.T, rep *bench.Report, name string) *bench.MacroResult {
	t.Helper()
	for _, r := range rep.Results {
		if r.Macro != nil && r.Macro.Name == name {
			return r.Macro
		}
	}
	t.Fatalf("no result for program %s in %d results", name, len(rep.Results))
	return nil
}

// runsOf is a program's cumulative counters as the kernel has them.
func runsOf(t *testing.T, p *ebpf.Program) (runs uint64, ns time.Duration) {
	t.Helper()
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.RunCount, st.Runtime
}

// packetFile is a 64-byte input for a socket filter's test run.
func packetFile(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "packet")
	if err := os.WriteFile(p, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStatCountsWhatTheCommandRan: a program the command runs exactly K
// times (bpftool prog run ... repeat K) shows +K runs and the kernel's
// run time delta, to the nanosecond; the command's exit status comes
// through; --repeat gives one measurement per run.
func TestStatCountsWhatTheCommandRan(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	buildTop(t)
	prog, err := privtest.LoadLoop("stat_loop", 200)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, _ := prog.Info()
	id, _ := info.ID()
	const k = 5000
	pkt := packetFile(t)
	runs0, ns0 := runsOf(t, prog)
	// The exit status 7 comes after the runs: the figures are reported
	// and the status passed on.
	rep, _, stderr, code := statJSON(t, "--interval", "50ms", "--prog", fmt.Sprint(id), "--",
		"sh", "-c", fmt.Sprintf("bpftool prog run id %d data_in %s repeat %d >/dev/null && exit 7", id, pkt, k))
	runs1, ns1 := runsOf(t, prog)
	if code != 7 {
		t.Errorf("exit %d, want the command's 7\n%s", code, stderr)
	}
	m := macroOf(t, rep, "stat_loop")
	if runs1-runs0 != k {
		t.Fatalf("the kernel counted %d runs, want %d: stats were not on", runs1-runs0, k)
	}
	if got := m.PerRun[0]; got.Runs != k || got.RunTimeNs != uint64(ns1-ns0) {
		t.Errorf("stat: %d runs in %d ns; the kernel: %d runs in %d ns", got.Runs, got.RunTimeNs, runs1-runs0, ns1-ns0)
	}
	if len(rep.Results) != 1 || m.Type != "socket_filter" || len(m.IDs) != 1 || m.IDs[0] != uint32(id) {
		t.Errorf("--prog %d: results %+v", id, rep.Results)
	}
	if m.Loaded || m.Unloaded {
		t.Errorf("a program loaded before and after is marked loaded=%v unloaded=%v", m.Loaded, m.Unloaded)
	}

	// Three runs: three measurements, each K runs; gobench has a line
	// per run with N = K.
	save := filepath.Join(t.TempDir(), "stat.json")
	rep, _, _, code = statJSON(t, "--interval", "50ms", "--prog", "stat_loop", "--repeat", "3", "--save", save, "--",
		"bpftool", "prog", "run", "id", fmt.Sprint(id), "data_in", pkt, "repeat", fmt.Sprint(k))
	if code != 0 {
		t.Fatalf("--repeat 3: exit %d", code)
	}
	r := rep.Results[0]
	if rep.Macro.Runs != 3 || len(r.Measurements()) != 3 || r.Macro.Runs.Median != k || r.Macro.Runs.IQR != 0 {
		t.Errorf("--repeat 3: %d runs, measurements %v, runs %+v", rep.Macro.Runs, r.Measurements(), r.Macro.Runs)
	}
	stdout, _, code := privtest.Exec(topBin.cli, "stat", "-o", "gobench", "--interval", "50ms", "--prog", "stat_loop", "-r", "2", "--",
		"bpftool", "prog", "run", "id", fmt.Sprint(id), "data_in", pkt, "repeat", fmt.Sprint(k))
	lines := regexp.MustCompile(`(?m)^BenchmarkStat/socket_filter/stat_loop\t5000\t[0-9.]+ ns/op$`).FindAllString(stdout, -1)
	if code != 0 || len(lines) != 2 {
		t.Errorf("-o gobench -r 2: exit %d, %d lines of N=5000:\n%s", code, len(lines), stdout)
	}
	// bench compare reads a saved stat report like a bench one.
	out, errOut, code := privtest.Exec(topBin.cli, "bench", "compare", save, save)
	if code != 0 || !strings.Contains(out, "stat/socket_filter/stat_loop") {
		t.Errorf("bench compare of stat reports: exit %d\n%s%s", code, out, errOut)
	}
}

// TestStatAgreesWithBpftrace: bpftrace, a tool nobody here wrote, loads
// a program of its own that counts getppid calls, and a helper makes
// 1000 of them: the program is reported as loaded and unloaded during
// the command, with exactly as many runs as bpftrace counted.
func TestStatAgreesWithBpftrace(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	buildTop(t)
	if _, err := exec.LookPath("bpftrace"); err != nil {
		privtest.Skip(t, "bpftrace is not installed (apt install bpftrace)")
	}
	privtest.Tracefs(t)
	// The helper is this test binary (getppidHelper): bpftrace runs it
	// with -c and ends when it does.
	t.Setenv(getppidEnv, "1000")
	rep, _, stderr, code := statJSON(t, "--interval", "50ms", "--filter", "getpp", "--",
		"bpftrace", "-e", "tracepoint:syscalls:sys_enter_getppid { @c = count(); }", "-c", os.Args[0])
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var counted uint64
	for _, r := range rep.Results {
		if r.Macro.Type == "tracepoint" {
			if !r.Macro.Loaded || !r.Macro.Unloaded {
				t.Errorf("%s: loaded=%v unloaded=%v, want both: bpftrace loaded and unloaded it", r.Name, r.Macro.Loaded, r.Macro.Unloaded)
			}
			counted += r.Macro.PerRun[0].Runs
		}
	}
	// bpftrace prints "@c: N" on its stdout, which -o json sends to
	// stderr.
	m := regexp.MustCompile(`@c: (\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("bpftrace printed no count:\n%s", stderr)
	}
	want, _ := strconv.ParseUint(m[1], 10, 64)
	if want < 1000 || counted != want {
		t.Errorf("stat counted %d runs of bpftrace's program, bpftrace counted %d (of at least 1000)", counted, want)
	}
}

// TestStatExecsnoop: libbpf-tools' execsnoop, started before stat, loads
// two programs whose kernel names are both tracepoint__sys; a command that
// execs /bin/echo N times under `stat -o json` gets two results under
// their full names, each with exactly the runs bpftool counted for it
// (bpftool is the oracle), and the command's own output, N lines of "hi",
// goes to stderr: stdout parses as JSON (encoding/json, and jq where it
// is installed).
func TestStatExecsnoop(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	buildTop(t)
	execsnoop := "/usr/sbin/execsnoop"
	if _, err := os.Stat(execsnoop); err != nil {
		if execsnoop, err = exec.LookPath("execsnoop"); err != nil {
			privtest.Skip(t, "libbpf-tools' execsnoop is not installed (apt install libbpf-tools)")
		}
	}
	if _, err := exec.LookPath("bpftool"); err != nil {
		privtest.Skip(t, "bpftool is not installed (apt install bpftool)")
	}
	privtest.Tracefs(t)
	// Stats off before and after stat (nobody else holding them on): the
	// kernel counts exactly while stat holds its stats fd, and stat reads
	// just inside that span, so bpftool's delta is stat's figure to the
	// run. With another holder the execs around stat (stat's own) count
	// too, and bpftool's delta may only be larger.
	othersCounting, err := privtest.StatsCounting()
	if err != nil {
		t.Fatal(err)
	}

	snoop := exec.Command(execsnoop)
	snoopOut, err := os.Create(filepath.Join(t.TempDir(), "execsnoop.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer snoopOut.Close()
	snoop.Stdout, snoop.Stderr = snoopOut, snoopOut
	if err := snoop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		snoop.Process.Kill()
		snoop.Wait()
	}()
	const enter, exit = "tracepoint__syscalls__sys_enter_execve", "tracepoint__syscalls__sys_exit_execve"
	ids := heldPrograms(t, snoop.Process.Pid, enter, exit)

	const n = 200
	before := map[string]uint64{}
	for name, id := range ids {
		before[name] = bpftoolRunCnt(t, id)
	}
	rep, stdout, stderr, code := statJSON(t, "--interval", "50ms", "--",
		"sh", "-c", fmt.Sprintf("for i in $(seq %d); do /bin/echo hi; done", n))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := strings.Count(stderr, "hi\n"); got != n {
		t.Errorf("stderr has %d lines of the command's \"hi\", want %d", got, n)
	}
	rows := map[string]string{} // name to result
	for name, id := range ids {
		delta := bpftoolRunCnt(t, id) - before[name]
		var found []bench.Result
		for _, r := range rep.Results {
			if slices.Contains(r.Macro.IDs, id) {
				found = append(found, r)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s (id %d): in %d results, want 1", name, id, len(found))
			continue
		}
		r := found[0]
		rows[name] = r.Name
		m := r.Macro
		if m.Name != name || m.KernelName != "tracepoint__sys" || m.Type != "tracepoint" || len(m.IDs) != 1 {
			t.Errorf("id %d: result %s: type %s, name %q, kernel name %q, ids %v; want %s, alone", id, r.Name, m.Type, m.Name, m.KernelName, m.IDs, name)
		}
		runs := m.PerRun[0].Runs
		t.Logf("%s: stat %d runs, bpftool +%d", r.Name, runs, delta)
		switch {
		case runs < n:
			t.Errorf("%s: %d runs, want at least the command's %d execs", name, runs, n)
		case !othersCounting && runs != delta:
			t.Errorf("%s: stat counted %d runs, bpftool %d", name, runs, delta)
		case othersCounting && runs > delta:
			t.Errorf("%s: stat counted %d runs, more than bpftool's %d", name, runs, delta)
		}
	}
	if rows[enter] == rows[exit] {
		t.Errorf("enter and exit are one result %q", rows[enter])
	}
	if jq, err := exec.LookPath("jq"); err == nil {
		cmd := exec.Command(jq, "-r", `.results[] | select(.macro.kernel_name == "tracepoint__sys") | .macro.name`)
		cmd.Stdin = strings.NewReader(stdout)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("jq on stat's stdout: %v\n%s", err, stdout)
		}
		if names := strings.Fields(string(out)); !slices.Contains(names, enter) || !slices.Contains(names, exit) {
			t.Errorf("jq: programs named tracepoint__sys by the kernel: %v, want %s and %s among them", names, enter, exit)
		}
	}
}

// heldPrograms waits until process pid holds programs named names (full
// names, as bpftool prints them), and returns their ids by name.
func heldPrograms(t *testing.T, pid int, names ...string) map[string]uint32 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids := map[string]uint32{}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fdinfo/*", pid))
		for _, fd := range fds {
			b, err := os.ReadFile(fd)
			if err != nil {
				continue
			}
			m := regexp.MustCompile(`(?m)^prog_id:\s+(\d+)$`).FindSubmatch(b)
			if m == nil {
				continue
			}
			id, _ := strconv.ParseUint(string(m[1]), 10, 32)
			var p struct{ Name string }
			if out, err := exec.Command("bpftool", "prog", "show", "-j", "id", fmt.Sprint(id)).Output(); err == nil && json.Unmarshal(out, &p) == nil {
				ids[p.Name] = uint32(id)
			}
		}
		all := true
		for _, n := range names {
			_, ok := ids[n]
			all = all && ok
		}
		if all {
			got := map[string]uint32{}
			for _, n := range names {
				got[n] = ids[n]
			}
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d holds programs %v after 10s, want %v", pid, ids, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bpftoolRunCnt is program id's run count as bpftool shows it (absent,
// so 0, before the program's first counted run).
func bpftoolRunCnt(t *testing.T, id uint32) uint64 {
	t.Helper()
	out, err := exec.Command("bpftool", "prog", "show", "-j", "id", fmt.Sprint(id)).Output()
	if err != nil {
		t.Fatalf("bpftool prog show id %d: %v", id, err)
	}
	var p struct {
		RunCnt uint64 `json:"run_cnt"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("bpftool prog show id %d: %v\n%s", id, err, out)
	}
	return p.RunCnt
}

// getppidEnv makes this test binary getppidHelper.
const getppidEnv = "BPFPERF_TEST_GETPPID"

// getppidHelper makes N getppid calls, then sleeps half a second so that
// stat reads the counters after the last call, before bpftrace unloads
// its program when this process ends.
func getppidHelper() {
	n, _ := strconv.Atoi(os.Getenv(getppidEnv))
	for range n {
		unix.Getppid()
	}
	time.Sleep(500 * time.Millisecond)
	os.Exit(0)
}

// TestStatWindow: --duration measures the live system: a program the
// test runs K times during the window shows K runs.
func TestStatWindow(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	buildTop(t)
	prog, err := privtest.LoadSocketFilter("stat_window")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const k = 300
	done := make(chan error, 1)
	go func() {
		// Start once stat has turned stats on, and a second later, when
		// it has long taken its first reading; the runs take a few ms,
		// well inside the 3 s window.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if on, _ := privtest.StatsCounting(); on {
				break
			}
		}
		time.Sleep(time.Second)
		done <- privtest.Run(prog, k)
	}()
	rep, _, stderr, code := statJSON(t, "--interval", "100ms", "--duration", "3s", "--prog", "stat_window")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if m := macroOf(t, rep, "stat_window"); m.PerRun[0].Runs != k || rep.Macro.WindowSeconds != 3 || len(rep.Macro.Command) != 0 {
		t.Errorf("window of 3s: %d runs, want %d; window %v s", m.PerRun[0].Runs, k, rep.Macro.WindowSeconds)
	}
}

// TestStatLeavesStatsAsTheyWere: without a daemon, stat turns run-time
// stats on with a stats fd of its own, for its lifetime only: the sysctl
// reads as before, and counting is as it was once stat has exited.
func TestStatLeavesStatsAsTheyWere(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	buildTop(t)
	sysctl := func() string {
		b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	before, on := sysctl(), false
	if c, err := privtest.StatsCounting(); err != nil {
		t.Fatal(err)
	} else {
		on = c
	}
	if on {
		privtest.Skip(t, "run-time stats are on already (another holder): cannot see stat put them back")
	}
	_, _, stderr, code := statJSON(t, "--interval", "20ms", "--", "sh", "-c", "sleep 0.2")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if after := sysctl(); after != before {
		t.Errorf("kernel.bpf_stats_enabled: %s before stat, %s after", before, after)
	}
	if c, _ := privtest.StatsCounting(); c {
		t.Error("run-time stats still count after stat exited")
	}
}

// TestStatThroughDaemon: with --source bpfperfd the readings are the
// daemon's, each from a tick after it was asked for, so a program the
// command runs K times shows exactly K runs and the kernel's run time.
func TestStatThroughDaemon(t *testing.T) {
	privtest.Root(t)
	buildTop(t)
	d := startTopDaemon(t, t.TempDir())
	prog, err := privtest.LoadLoop("stat_daemon", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, _ := prog.Info()
	id, _ := info.ID()
	const k = 2000
	runs0, ns0 := runsOf(t, prog)
	t.Setenv("BPFPERF_SOCKET", d.socket)
	rep, _, stderr, code := statJSON(t, "--source", "bpfperfd", "--prog", "stat_daemon", "--",
		"bpftool", "prog", "run", "id", fmt.Sprint(id), "data_in", packetFile(t), "repeat", fmt.Sprint(k))
	runs1, ns1 := runsOf(t, prog)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	m := macroOf(t, rep, "stat_daemon")
	if got := m.PerRun[0]; got.Runs != k || runs1-runs0 != k || got.RunTimeNs != uint64(ns1-ns0) {
		t.Errorf("through bpfperfd: %d runs in %d ns; the kernel: %d runs in %d ns", got.Runs, got.RunTimeNs, runs1-runs0, ns1-ns0)
	}
	if rep.Macro.Source != "bpfperfd" || rep.Macro.IntervalMS != 200 {
		t.Errorf("source %q, interval %v ms: want bpfperfd's 200 ms", rep.Macro.Source, rep.Macro.IntervalMS)
	}
	// Asking for readings more often than the daemon takes them is refused.
	_, stderr, code = privtest.Exec(topBin.cli, "stat", "--source", "bpfperfd", "--interval", "50ms", "--", "true")
	if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "bpfperfd reads every 200ms") {
		t.Errorf("--interval below the daemon's: exit %d\n%s", code, stderr)
	}
}

// TestStatBadInput: each mistake gets one line naming it and a non-zero
// exit.
func TestStatBadInput(t *testing.T) {
	privtest.Root(t)
	buildTop(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stat"}, "no command to run"},
		{[]string{"stat", "--", "/nonexistent/cmd"}, "start /nonexistent/cmd: no such file or directory"},
		{[]string{"stat", "--interval", "20ms", "--prog", "no_such_prog_x", "--", "true"}, "--prog no_such_prog_x: no such program"},
		{[]string{"stat", "--duration", "50ms"}, "--duration 50ms: must be within"},
		{[]string{"stat", "--duration", "25h"}, "--duration 25h0m0s: must be within"},
		{[]string{"stat", "--duration", "1s", "--", "true"}, "a command or --duration, not both"},
		{[]string{"stat", "--interval", "1ms", "--", "true"}, "--interval 1ms: must be within"},
		{[]string{"stat", "--repeat", "0", "--", "true"}, "--repeat 0: must be within"},
		{[]string{"stat", "-o", "xml", "--", "true"}, `unknown format "xml"`},
		{[]string{"stat", "--filter", "(", "--", "true"}, "--filter: error parsing regexp"},
		{[]string{"stat", "--source", "nowhere", "--", "true"}, `--source "nowhere"`},
		{[]string{"stat", "--profile-out", "p.pb.gz", "--", "true"}, "--profile-out needs --profile"},
		{[]string{"stat", "--profile", "--profile-out", "/nonexistent/p.pb.gz", "--", "true"}, "--profile-out: open /nonexistent/p.pb.gz: no such file or directory"},
	} {
		stdout, stderr, code := privtest.Exec(topBin.cli, c.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code == 0 || len(lines) != 1 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
	// A command's flags are its own, with or without "--"; with -o csv
	// its output goes to stderr and stdout is the CSV alone.
	stdout, stderr, code := privtest.Exec(topBin.cli, "stat", "-o", "csv", "--interval", "20ms", "sh", "-c", "echo -n ok")
	if code != 0 || !strings.HasPrefix(stdout, "timestamp,test,") || stderr != "ok" {
		t.Errorf("stat sh -c ...: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// With the table, the command's output stays on stdout and the table
	// goes to stderr, as perf stat does.
	stdout, stderr, code = privtest.Exec(topBin.cli, "stat", "--interval", "20ms", "sh", "-c", "echo -n ok")
	if code != 0 || stdout != "ok" || !strings.Contains(stderr, "1 run of `sh -c 'echo -n ok'`") {
		t.Errorf("stat (table) sh -c ...: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestStatProfile: with --profile, a tail-call target that the kernel's
// stats charge to its entry program gets a sampled CPU share of its own,
// close to the entry's stats CPU % (the target does the work), and the
// --profile-out file is a pprof profile whose samples name the target.
func TestStatProfile(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	buildTop(t)
	target, err := privtest.LoadLoop("stat_tc_target", 20000)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	entry, jump, err := privtest.LoadTailCallEntry("stat_tc_entry", target)
	if err != nil {
		t.Fatal(err)
	}
	defer entry.Close()
	defer jump.Close()
	info, _ := entry.Info()
	id, _ := info.ID()
	out := filepath.Join(t.TempDir(), "stat.pb.gz")
	// About a second of the target's loop.
	rep, _, stderr, code := statJSON(t, "--profile", "--profile-out", out, "--prog", "stat_tc_entry", "--prog", "stat_tc_target", "--",
		"bpftool", "prog", "run", "id", fmt.Sprint(id), "data_in", packetFile(t), "repeat", "100000")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	e, tg := macroOf(t, rep, "stat_tc_entry"), macroOf(t, rep, "stat_tc_target")
	if e.Runs.Median != 100000 || tg.Runs.Median != 0 {
		t.Errorf("runs: entry %v, target %v: want the stats to charge all 100000 to the entry", e.Runs.Median, tg.Runs.Median)
	}
	if tg.SampledCPUPercent == nil || e.SampledCPUPercent == nil {
		t.Fatalf("no sampled share: entry %v, target %v", e.SampledCPUPercent, tg.SampledCPUPercent)
	}
	t.Logf("entry: %v runs, stats CPU %.1f%%, sampled %.1f%%; target: sampled %.1f%%", e.Runs.Median, e.CPUPercent.Median, e.SampledCPUPercent.Median, tg.SampledCPUPercent.Median)
	if s := tg.SampledCPUPercent.Median; s < 0.5*e.CPUPercent.Median || s > 1.5*e.CPUPercent.Median {
		t.Errorf("target sampled %.1f%%, entry's stats CPU %.1f%%: want within 0.5x..1.5x", s, e.CPUPercent.Median)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, s := range p.Sample {
		for _, n := range s.Label[profile.LabelProgName] {
			names[n]++
		}
	}
	if names["stat_tc_target"] == 0 {
		t.Errorf("--profile-out: samples by program %v, none of the target", names)
	}
}
