package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// The end-to-end tests run the real binaries: bpfperfd as a child process
// against the real kernel, and the bpfperf CLI against its socket.
var bin struct{ daemon, cli string }

func TestMain(m *testing.M) {
	privtest.HelperMain()
	if os.Getenv(ownerChildEnv) != "" {
		os.Exit(ownerChild()) // a helper process of owners_e2e_test.go
	}
	if os.Getenv(legacyChildEnv) != "" {
		os.Exit(legacyChild()) // a loader of legacy_store_test.go
	}
	if os.Getenv(leastChildEnv) != "" {
		os.Exit(leastProcess()) // the least sweeping process of BenchmarkDaemonIdleGoals
	}
	// The tests run many daemons at once; the one that checks the
	// host-wide lock names a lock file of its own.
	os.Setenv("BPFPERF_HOST_LOCK", "none")
	dir, err := os.MkdirTemp("", "bpfperf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // the unprivileged test runs the daemon as nobody
	bin.daemon, bin.cli = filepath.Join(dir, "bpfperfd"), filepath.Join(dir, "bpfperf")
	// BPFPERF_TEST_DAEMON runs a bpfperfd built elsewhere instead, to
	// compare two builds' costs in the benchmarks, alternated in one run;
	// with BPFPERF_TEST_CLI too, nothing is built (a machine without Go).
	daemon, cli := os.Getenv("BPFPERF_TEST_DAEMON"), os.Getenv("BPFPERF_TEST_CLI")
	if daemon == "" || cli == "" {
		for out, pkg := range map[string]string{bin.daemon: "../cmd/bpfperfd", bin.cli: "../cmd/bpfperf"} {
			if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, b)
				os.Exit(1)
			}
		}
	}
	if daemon != "" {
		bin.daemon = daemon
	}
	if cli != "" {
		bin.cli = cli
	}
	// The pods' tests share a container node (internal/node), which the
	// last test binary to let go of it stops.
	code := node.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

type daemonProc struct {
	cmd      *exec.Cmd
	stateDir string
	socket   string
	stderr   *bytes.Buffer
	done     chan error
}

// startDaemon runs bpfperfd with a 200 ms interval (args may override it:
// the last flag wins) on stateDir and waits until its API answers.
func startDaemon(t testing.TB, stateDir string, args ...string) *daemonProc {
	t.Helper()
	return startDaemonUnder(t, nil, stateDir, args...)
}

// startDaemonUnder is startDaemon with bpfperfd run by the command wrap
// (e.g. prlimit with its flags); nil runs it directly.
func startDaemonUnder(t testing.TB, wrap []string, stateDir string, args ...string) *daemonProc {
	t.Helper()
	return startDaemonIn(t, nil, wrap, stateDir, args...)
}

// startDaemonIn is startDaemonUnder with the command started in cgroup cg
// from its first instruction (nil: the test's own).
func startDaemonIn(t testing.TB, cg *privtest.Cgroup, wrap []string, stateDir string, args ...string) *daemonProc {
	t.Helper()
	// The daemon holds stats on: keep stats-sensitive tests of other
	// packages from running meanwhile.
	privtest.LockStats(t)
	d := &daemonProc{stateDir: stateDir, socket: filepath.Join(stateDir, "api.sock"), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	argv := append(append(slices.Clone(wrap), bin.daemon, "--state-dir", stateDir, "--socket", d.socket, "--interval", "200ms"), args...)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Stderr = d.stderr
	if cg != nil {
		d.cmd.SysProcAttr = cg.ProcAttr()
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	start := time.Now()
	deadline := start.Add(startWait)
	for time.Now().Before(deadline) {
		// Ready once the first sweep is stored, so tests see a baseline.
		var st api.Status
		if d.query(&st, "status") == nil && !st.LastSample.IsZero() {
			if took := time.Since(start); took > 2*time.Second {
				t.Logf("bpfperfd answered after %s", took.Round(time.Millisecond))
			}
			return d
		}
		select {
		case err := <-d.done:
			t.Fatalf("bpfperfd exited early: %v\n%s", err, d.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Its goroutines' stacks, in the stderr printed below: a daemon that
	// runs but never stores a sweep is stuck somewhere.
	d.cmd.Process.Signal(syscall.SIGQUIT)
	time.Sleep(2 * time.Second)
	t.Fatalf("bpfperfd did not answer in %s\n%s", startWait, d.stderr)
	return nil
}

// startWait bounds a daemon's start: 10 s on the host; in the emulated
// VM a start takes several times as long, and more on a busy host (CI's
// busy run saw three x86 VM daemons not answer in 10 s), most of all
// in the arm64 one (TCG, Arm on x86).
var startWait = func() time.Duration {
	switch {
	case vmtest.InVM() && runtime.GOARCH == "arm64":
		return 60 * time.Second
	case vmtest.InVM():
		return 40 * time.Second
	}
	return 10 * time.Second
}()

// stop sends sig and waits for the daemon to exit.
func (d *daemonProc) stop(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	d.cmd.Process.Signal(sig)
	select {
	case err := <-d.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("bpfperfd did not stop on %v\n%s", sig, d.stderr)
		return nil
	}
}

func (d *daemonProc) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(bin.cli, append([]string{"--socket", d.socket}, args...)...)
	if code != 0 {
		t.Fatalf("bpfperf %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func (d *daemonProc) json(t *testing.T, v any, args ...string) {
	t.Helper()
	if err := d.query(v, args...); err != nil {
		t.Fatal(err)
	}
}

// query runs the CLI with -o json and decodes its answer into v.
func (d *daemonProc) query(v any, args ...string) error {
	out, errOut, code := run(bin.cli, append([]string{"--socket", d.socket}, append(args, "-o", "json")...)...)
	if code != 0 {
		return fmt.Errorf("bpfperf %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("bpfperf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// eventually polls cond every 50 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, cond)
}

// eventuallyWithin polls cond every 50 ms for up to limit.
func eventuallyWithin(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bpftoolProg returns `bpftool prog show id N -j`, or ok=false if bpftool
// does not know the id.
func bpftoolProg(t *testing.T, id uint32) (map[string]any, bool) {
	t.Helper()
	out, errOut, code := run("bpftool", "prog", "show", "id", fmt.Sprint(id), "-j")
	if code != 0 {
		if strings.Contains(errOut+out, "No such file") || strings.Contains(errOut+out, "can't get prog by id") {
			return nil, false
		}
		t.Fatalf("bpftool: %s %s", out, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("bpftool json: %v\n%s", err, out)
	}
	return m, true
}

func needBpftool(t *testing.T) {
	if _, err := exec.LookPath("bpftool"); err != nil {
		privtest.Skip(t, "bpftool not installed (apt-get install bpftool)")
	}
}

// progFds counts the fds of pid that hold a BPF program or link, except
// the daemon's own iterators (the sweep's iter link on bpf_prog, the map
// watcher's on bpf_map, and their programs), which it holds for its life.
func progFds(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type held struct{ fdinfo, progID string }
	var bpfFds []held
	own := map[string]bool{} // program ids of the daemon's iterator links
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join(dir, fd.Name()))
		if !strings.Contains(target, "bpf-prog") && !strings.Contains(target, "bpf_link") {
			continue
		}
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		h := held{fdinfo: string(info)}
		for _, line := range strings.Split(h.fdinfo, "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				h.progID = strings.TrimSpace(v)
			}
		}
		// The sweep's iterator (bpf_prog), the map watcher's (bpf_map) and
		// the holders' (task_file).
		if strings.Contains(h.fdinfo, "target_name:\tbpf_prog") || strings.Contains(h.fdinfo, "target_name:\tbpf_map") ||
			strings.Contains(h.fdinfo, "target_name:\ttask_file") {
			own[h.progID] = true
		}
		bpfFds = append(bpfFds, h)
	}
	n := 0
	for _, h := range bpfFds {
		if !own[h.progID] && !heldForLife(h.progID) {
			n++
		}
	}
	return n
}

// fdsHeldBetweenTicks is the fewest program and link fds (progFds) pid
// holds over looks 70 ms apart for up to three seconds, stopping at the
// first look that finds none. The daemon may open a program for the
// moments of a sweep, an owners scan or a load-record read, so one look can
// catch an fd that is let go at once; an fd seen in every look over three
// seconds is held past a tick (the e2e daemons tick every second or less).
// Under emulation a tick's sweep takes hundreds of milliseconds: five looks
// over 280 ms in the VM once all fell inside one (TestLatencyEndToEnd, 3
// fds), where looks over three seconds find the gap between ticks.
func fdsHeldBetweenTicks(t *testing.T, pid int) int {
	t.Helper()
	fewest := progFds(t, pid)
	for deadline := time.Now().Add(3 * time.Second); fewest > 0 && time.Now().Before(deadline); {
		time.Sleep(70 * time.Millisecond)
		fewest = min(fewest, progFds(t, pid))
	}
	return fewest
}

// heldForLife says whether program id is one of the loaders' programs
// (daemon/loaders: the fentry program on perf_event_bpf_event, or the
// tracepoint programs on sys_enter_bpf and sys_exit_bpf), which bpfperfd
// holds, with their links, for its whole life, or the profiler's kernel
// filter (profile/kfilter), which it holds while profiling runs.
func heldForLife(id string) bool {
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return false
	}
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(n))
	if err != nil {
		return false
	}
	defer p.Close()
	info, err := p.Info()
	return err == nil && (info.Name == "bpfperf_loadrec" || info.Name == "bpfperf_loaded" || info.Name == "bpfperf_loadent" || info.Name == "bpfperf_kfilter")
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, nameSeq.Add(1)%1_000_000)
}

// nameSeq numbers uniqueName's names: from the clock, so that two runs'
// names differ, then one by one, so that tests running in parallel
// (parallelWaiting) never draw the same.
var nameSeq = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(time.Now().UnixNano() % 1_000_000)
	return &n
}()

// parallelWaiting runs a test beside others like it, after the package's
// other tests are done (t.Parallel; four at a time, make test's
// -parallel 4). For tests
// that mostly wait, on a daemon's ticks, Prometheus, a browser, a
// container or a disk filling, and whose checks hold on a shared CPU:
// each runs a daemon of its own on programs of names of its own, takes no
// stats lock (privtest.LockStats), and times nothing. The tests that
// measure (duty cycles, budgets, regressions, costs) stay alone, and so
// do those that check the stats budget's line: a daemon measures what a
// run of bpf_stats costs as it starts, with stats off, which it cannot
// while another daemon holds them on (TestDashboardInBrowser, run beside
// the others once, read "budget off: the cost of a run was not
// measured"); TestChurn: its bursts of hundreds of programs overrun the
// other daemons' load records, and identities that need them failed
// beside it; and TestPodLoaders, whose identities wait a bounded time for
// the CRI to name a container: beside the others, once, a container
// restarted after the socket came back was named by ids. Saves
// CI about a minute and a half (docs/testing.md).
func parallelWaiting(t *testing.T) {
	t.Helper()
	t.Parallel()
}

func TestRunCountMatchesKernelExactly(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	d := startDaemon(t, t.TempDir())

	name := uniqueName("e2e_cnt")
	prog, err := privtest.LoadLoop(name, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const runs = 12_347
	if err := privtest.Run(prog, runs); err != nil {
		t.Fatal(err)
	}
	info, _ := prog.Info()
	id, _ := info.ID()

	var got api.ProgDetail
	eventually(t, "the daemon to see every run", func() bool {
		return d.query(&got, "show", name) == nil && got.RunCnt == runs
	})
	if got.ID != uint32(id) || got.Type != "socket_filter" || got.Name != name {
		t.Errorf("show %s = id %d type %s name %s, want id %d socket_filter", name, got.ID, got.Type, got.Name, id)
	}
	// Let one more sweep pass so the program is idle in the daemon's view.
	time.Sleep(500 * time.Millisecond)
	d.json(t, &got, "show", fmt.Sprint(id))
	kernel, ok := bpftoolProg(t, uint32(id))
	if !ok {
		t.Fatal("bpftool does not list the program")
	}
	if want := uint64(kernel["run_time_ns"].(float64)); got.RunTimeNs != want || got.RunTimeNs == 0 {
		t.Errorf("run_time_ns = %d, bpftool says %d", got.RunTimeNs, want)
	}
	if want := uint64(kernel["run_cnt"].(float64)); got.RunCnt != want {
		t.Errorf("run_cnt = %d, bpftool says %d", got.RunCnt, want)
	}
	if got.Meta.Tag != kernel["tag"] || got.Meta.BytesXlated != uint32(kernel["bytes_xlated"].(float64)) {
		t.Errorf("meta %+v disagrees with bpftool %v", got.Meta, kernel)
	}

	// The same numbers through `progs`, as JSON and CSV.
	var rows []api.ProgRow
	d.json(t, &rows, "progs")
	found := false
	for _, r := range rows {
		if r.ID == uint32(id) {
			found = r.RunCnt == runs && r.RunTimeNs == got.RunTimeNs
		}
	}
	if !found {
		t.Errorf("progs -o json does not show id %d with run_cnt %d", id, runs)
	}
	csv := d.cli(t, "progs", "-o", "csv")
	if !strings.Contains(csv, fmt.Sprintf("%d,socket_filter,%s,", id, name)) || !strings.Contains(csv, fmt.Sprintf(",%d,%d,", runs, got.RunTimeNs)) {
		t.Errorf("progs -o csv lacks the program's row:\n%s", csv)
	}
}

// run runs a binary: privtest.Exec.
func run(name string, args ...string) (string, string, int) { return privtest.Exec(name, args...) }
