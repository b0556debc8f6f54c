package daemon_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// Tools nobody here wrote, run under a real bpfperfd and compared with
// bpftool on the same programs: libbpf-tools (execsnoop, opensnoop) and
// bpftrace.

// tool is a BPF tool running in the background.
type tool struct {
	cmd *exec.Cmd
	pid int
}

func startTool(t *testing.T, argv ...string) *tool {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		privtest.Skip(t, argv[0]+" not installed (apt-get install libbpf-tools bpftrace)")
	}
	privtest.Tracefs(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tl := &tool{cmd: cmd, pid: cmd.Process.Pid}
	t.Cleanup(tl.stop)
	return tl
}

func (tl *tool) stop() {
	if tl.cmd.ProcessState == nil {
		syscall.Kill(-tl.pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { tl.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-tl.pid, syscall.SIGKILL)
			<-done
		}
	}
}

// toolProgs waits until bpftool perf lists want programs of pid, and
// returns their ids by tracepoint.
func toolProgs(t *testing.T, pid, want int) map[string]uint32 {
	t.Helper()
	needBpftool(t)
	var got map[string]uint32
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, code := run("bpftool", "perf", "-j")
		if code != 0 {
			t.Fatalf("bpftool perf: %s", errOut)
		}
		var all []privtest.BpftoolPerf
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			t.Fatalf("bpftool perf json: %v\n%s", err, out)
		}
		got = map[string]uint32{}
		for _, p := range all {
			if p.PID == pid {
				got[p.Tracepoint] = p.ProgID
			}
		}
		if len(got) >= want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d has %d of %d programs attached after 30s: %v", pid, len(got), want, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settledRows waits until the daemon lists every id settled (an identity)
// and returns their rows.
func settledRows(t *testing.T, d *daemonProc, ids ...uint32) map[uint32]api.ProgRow {
	t.Helper()
	rows := map[uint32]api.ProgRow{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var all []api.ProgRow
		d.json(t, &all, "progs")
		clear(rows)
		for _, r := range all {
			if slices.Contains(ids, r.ID) && r.Identity != "" {
				rows[r.ID] = r
			}
		}
		if len(rows) == len(ids) {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d of %d programs have an identity: %+v", len(rows), len(ids), rows)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventsOf returns the stored events of kind since the test began.
func eventsOf(t *testing.T, d *daemonProc, kind string) []api.Event {
	t.Helper()
	var evs []api.Event
	d.json(t, &evs, "events", "--since", "10m")
	var out []api.Event
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// bpftoolField is one field of `bpftool prog show id ID -j`, now.
func bpftoolField(t *testing.T, id uint32, field string) any {
	t.Helper()
	m, ok := bpftoolProg(t, id)
	if !ok {
		t.Fatalf("bpftool does not know program %d", id)
	}
	return m[field]
}

// bpftoolRuns is a program's run count as bpftool reads it now.
func bpftoolRuns(t *testing.T, id uint32) uint64 {
	n, _ := bpftoolField(t, id, "run_cnt").(float64)
	return uint64(n)
}

func bpftoolName(t *testing.T, id uint32) string {
	name, _ := bpftoolField(t, id, "name").(string)
	return name
}

// runsBetweenBpftool checks the daemon's run count of id against bpftool's
// read just before and just after one of the daemon's sweeps: programs on
// busy tracepoints never stand still, so the kernel's figure is a range.
func runsBetweenBpftool(t *testing.T, d *daemonProc, id uint32) uint64 {
	t.Helper()
	before := bpftoolRuns(t, id)
	at := time.Now()
	var row api.ProgRow
	eventually(t, "a sweep after bpftool's reading", func() bool {
		var rows []api.ProgRow
		d.json(t, &rows, "progs")
		for _, r := range rows {
			if r.ID == id && r.LastSample.After(at) {
				row = r
				return true
			}
		}
		return false
	})
	after := bpftoolRuns(t, id)
	if row.RunCnt < before || row.RunCnt > after {
		t.Errorf("program %d: bpfperfd read %d runs, bpftool %d before and %d after its sweep", id, row.RunCnt, before, after)
	}
	return row.RunCnt
}

func TestRealToolsExecsnoopOpensnoop(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--log-level", "info", "--regressions.window", "2s")
	exec1 := startTool(t, "execsnoop")
	open1 := startTool(t, "opensnoop")
	execs := toolProgs(t, exec1.pid, 2)
	opens := toolProgs(t, open1.pid, 4) // open and openat, enter and exit
	var ids []uint32
	for _, id := range execs {
		ids = append(ids, id)
	}
	for _, id := range opens {
		ids = append(ids, id)
	}
	rows := settledRows(t, d, ids...)

	// Each program once, under bpftool's full name, held by its tool alone
	// (not by bpfperfd, whose brief fds are no holding), attached where
	// bpftool perf says.
	names := map[string]bool{}
	for tp, id := range execs {
		checkToolRow(t, rows[id], bpftoolName(t, id), exec1.pid, tp)
		names[rows[id].Name] = true
	}
	for tp, id := range opens {
		checkToolRow(t, rows[id], bpftoolName(t, id), open1.pid, tp)
		names[rows[id].Name] = true
	}
	if len(names) != len(ids) {
		t.Errorf("%d programs under %d names: %v", len(ids), len(names), names)
	}
	for _, want := range []string{"tracepoint__syscalls__sys_enter_execve", "tracepoint__syscalls__sys_exit_execve", "tracepoint__syscalls__sys_enter_openat"} {
		if !names[want] {
			t.Errorf("no program named %s in %v", want, names)
		}
	}

	// A known number of execs: the daemon's run counts are the kernel's.
	enter := execs["sys_enter_execve"]
	start := runsBetweenBpftool(t, d, enter)
	const n = 100
	for range n {
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	if end := runsBetweenBpftool(t, d, enter); end-start < n {
		t.Errorf("sys_enter_execve ran %d times over %d execs", end-start, n)
	}
	for _, id := range opens {
		runsBetweenBpftool(t, d, id)
	}

	// Different programs are never versions of each other, and nothing
	// was compared as one.
	time.Sleep(3 * time.Second) // past a regression window
	if evs := eventsOf(t, d, "new_version"); len(evs) != 0 {
		t.Errorf("new_version events among different programs: %+v", evs)
	}
	var regs []api.Regression
	d.json(t, &regs, "regressions", "--since", "10m")
	if len(regs) != 0 {
		t.Errorf("regression findings: %+v", regs)
	}
	if log := d.stderr.String(); strings.Contains(log, "new version not compared") {
		t.Errorf("the detector took a program for a new version of another:\n%s", log)
	}

	// A second execsnoop at the same time: two more identities, still no
	// version relation.
	exec2 := startTool(t, "execsnoop")
	execs2 := toolProgs(t, exec2.pid, 2)
	var ids2 []uint32
	for _, id := range execs2 {
		ids2 = append(ids2, id)
	}
	rows2 := settledRows(t, d, ids2...)
	for tp, id := range execs2 {
		first := rows[execs[tp]]
		if rows2[id].Identity == first.Identity {
			t.Errorf("two copies of execsnoop share identity %q", first.Identity)
		}
		if rows2[id].Name != first.Name || rows2[id].Where != first.Where {
			t.Errorf("second copy: %s at %s, first %s at %s", rows2[id].Name, rows2[id].Where, first.Name, first.Where)
		}
	}
	time.Sleep(time.Second)
	if evs := eventsOf(t, d, "new_version"); len(evs) != 0 {
		t.Errorf("new_version events between two copies of one tool: %+v", evs)
	}
}

// checkToolRow checks a tool's program as bpfperfd lists it against
// bpftool: its full name, its holder, where it is attached.
func checkToolRow(t *testing.T, r api.ProgRow, bpftoolName string, pid int, tracepoint string) {
	t.Helper()
	if r.Name != bpftoolName {
		t.Errorf("program %d: name %q, bpftool %q", r.ID, r.Name, bpftoolName)
	}
	if len(r.KernelName) > 15 || !strings.HasPrefix(r.Name, r.KernelName) {
		t.Errorf("program %d: kernel name %q for %q", r.ID, r.KernelName, r.Name)
	}
	if r.Own {
		t.Errorf("program %d (%s) listed as bpfperfd's own", r.ID, r.Name)
	}
	var pids []int
	for _, o := range r.Owners {
		pids = append(pids, o.PID)
	}
	if !slices.Equal(pids, []int{pid}) {
		t.Errorf("program %d (%s): holders %v, bpftool perf says %d", r.ID, r.Name, pids, pid)
	}
	if want := "perf_event tracepoint " + tracepoint; r.Where != want {
		t.Errorf("program %d (%s): where %q, want %q", r.ID, r.Name, r.Where, want)
	}
}

func TestRealToolsBpftraceNewVersion(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--log-level", "info", "--regressions.window", "2s")
	// Another program on the same tracepoint, running all along: it must
	// never be taken for a version of bpftrace's.
	other := startTool(t, "opensnoop")
	otherProgs := toolProgs(t, other.pid, 4)
	// Opens enough for every interval to have runs to compare (the
	// detector skips intervals of fewer than 10).
	stopOpens := openLoad(t, 500)
	defer stopOpens()

	v1 := startTool(t, "bpftrace", "-e", "tracepoint:syscalls:sys_enter_openat { @a = count(); }")
	id1 := toolProgs(t, v1.pid, 1)["sys_enter_openat"]
	r1 := settledRows(t, d, id1)[id1]
	v1.stop()
	v2 := startTool(t, "bpftrace", "-e", "tracepoint:syscalls:sys_enter_openat { @a = count(); @b = sum(1); }")
	id2 := toolProgs(t, v2.pid, 1)["sys_enter_openat"]
	r2 := settledRows(t, d, id2)[id2]

	if r1.Tag == r2.Tag {
		t.Fatalf("the changed script loaded the same code (tag %s)", r1.Tag)
	}
	if r1.Identity != r2.Identity {
		t.Errorf("bpftrace restarted with a changed body: identities %q and %q, want one", r1.Identity, r2.Identity)
	}
	if r2.Where != "perf_event tracepoint sys_enter_openat" || !strings.HasSuffix(r2.Identity, " by bpftrace") {
		t.Errorf("bpftrace's program: where %q, identity %q", r2.Where, r2.Identity)
	}
	var nv []api.Event
	eventually(t, "a new_version event", func() bool { nv = eventsOf(t, d, "new_version"); return len(nv) > 0 })
	time.Sleep(time.Second)
	nv = eventsOf(t, d, "new_version")
	if len(nv) != 1 || nv[0].ID != id2 || nv[0].Identity != r2.Identity || nv[0].Detail != "previous tag "+r1.Tag {
		t.Errorf("new_version events %+v, want one for %d (%s) after tag %s", nv, id2, r2.Identity, r1.Tag)
	}
	// The regression detector compares the two bpftrace versions, and
	// only them: whatever it says of a new version names bpftrace's
	// identity.
	time.Sleep(3 * time.Second)
	mentioned := 0
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if !strings.Contains(line, "new version not compared") && !strings.Contains(line, "regression detection") {
			continue
		}
		mentioned++
		if !strings.Contains(line, r2.Identity) {
			t.Errorf("the detector compared another program: %s", line)
		}
	}
	if mentioned == 0 {
		t.Errorf("the detector said nothing of bpftrace's new version:\n%s", d.stderr)
	}
	for _, id := range otherProgs {
		if id == id2 {
			t.Fatalf("opensnoop and bpftrace share id %d", id)
		}
	}
}

// openLoad opens /dev/null perSec times a second until stopped.
func openLoad(t *testing.T, perSec int) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / time.Duration(perSec))
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if f, err := os.Open("/dev/null"); err == nil {
					f.Close()
				}
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}
