package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// legacyChildEnv makes the test binary a loader named legacygen (its comm,
// so that it runs programs under one name in the fixture and in the test):
// "VERSION RUNS" loads a socket filter legacy_prog whose code depends on
// VERSION, runs it RUNS times, prints "ready", and exits when stdin closes.
// testdata/legacy/README.md says how the fixture was made with it.
const legacyChildEnv = "BPFPERF_LEGACY_CHILD"

func legacyChild() int {
	var version, runs int
	if _, err := fmt.Sscan(os.Getenv(legacyChildEnv), &version, &runs); err != nil {
		fmt.Println("bad", legacyChildEnv, err)
		return 2
	}
	name := []byte("legacygen\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	rlimit.RemoveMemlock()
	insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0)}
	for i := 1; i < version; i++ {
		insns = append(insns, asm.Mov.Imm(asm.R1, int32(i)))
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "legacy_prog", Type: ebpf.SocketFilter, License: "MIT", Instructions: append(insns, asm.Return())})
	if err != nil {
		fmt.Println("load:", err)
		return 1
	}
	defer prog.Close()
	if err := privtest.Run(prog, runs); err != nil {
		fmt.Println("run:", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// legacyLoader is a running legacygen process.
type legacyLoader struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startLegacyLoader(t *testing.T, version, runs int) *legacyLoader {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", legacyChildEnv, version, runs))
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &legacyLoader{cmd: cmd, stdin: stdin}
	t.Cleanup(l.stop)
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("legacy loader: %q", sc.Text())
	}
	return l
}

func (l *legacyLoader) stop() {
	if l.cmd.ProcessState == nil {
		l.stdin.Close()
		l.cmd.Wait()
	}
}

// legacyExpect is what the fixture's own daemon (main at 1b85c52) answered
// about it, saved beside it when it was made.
type legacyExpect struct {
	Since, Until time.Time
	History      []api.HistoryPoint
	Events       []api.Event
	Tags         []string // legacy_prog's versions, oldest first
}

// TestStoreFromBeforeIdentities opens a store written by the daemon of
// before full names and identities (testdata/legacy): its history reads
// as that daemon read it, its cut names still name its programs, and a
// program that carries on one of its identities (same name, type and
// runner) is a new version of it, with history running on.
func TestStoreFromBeforeIdentities(t *testing.T) {
	privtest.Root(t)
	var want legacyExpect
	raw, err := os.ReadFile("testdata/legacy/expect.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := os.ReadFile("testdata/legacy/bpfperf.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bpfperf.db"), db, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir)
	span := []string{"--since", want.Since.Format(time.RFC3339Nano), "--until", want.Until.Format(time.RFC3339Nano)}

	// History intact: every point the old daemon served, as it served it.
	var hist []api.HistoryPoint
	d.json(t, &hist, append([]string{"history", "legacy_prog"}, span...)...)
	if !slices.EqualFunc(hist, want.History, samePoint) {
		t.Errorf("history of legacy_prog:\n got %+v\nwant %+v", hist, want.History)
	}
	var evs []api.Event
	d.json(t, &evs, append([]string{"events", "--prog", "legacy_prog"}, span...)...)
	if !slices.EqualFunc(evs, want.Events, func(a, b api.Event) bool {
		return a.Time.Equal(b.Time) && a.Kind == b.Kind && a.ID == b.ID && a.Name == b.Name && a.Tag == b.Tag && a.Detail == b.Detail
	}) {
		t.Errorf("events of legacy_prog:\n got %+v\nwant %+v", evs, want.Events)
	}
	// The old records keep the names they were stored under (execsnoop's
	// cut ones among them), and say it is also the kernel's name.
	var all []api.ProgRow
	d.json(t, &all, "progs", "--all")
	cut := 0
	for _, r := range all {
		if r.Name == "tracepoint__sys" && r.KernelName == r.Name && !r.Loaded {
			cut++
		}
	}
	if cut < 2 {
		t.Errorf("%d of execsnoop's old records under the cut name, want its 2", cut)
	}

	// A new version today, loaded by the same runner: its identity
	// continues legacy_prog's, so it is a new version after the last
	// stored tag, and its history begins with the old points.
	started := time.Now().Format(time.RFC3339Nano)
	l := startLegacyLoader(t, len(want.Tags)+1, 100)
	var nv []api.Event
	eventually(t, "legacy_prog's new version", func() bool {
		nv = nv[:0]
		var evs []api.Event
		d.json(t, &evs, "events", "--since", started, "--prog", "legacy_prog")
		for _, e := range evs {
			if e.Kind == "new_version" {
				nv = append(nv, e)
			}
		}
		return len(nv) > 0
	})
	if len(nv) != 1 || nv[0].Detail != "previous tag "+want.Tags[len(want.Tags)-1] || nv[0].Identity != "socket_filter/legacy_prog by legacygen" {
		t.Fatalf("new_version events %+v, want one after tag %s by legacygen", nv, want.Tags[len(want.Tags)-1])
	}
	d.json(t, &hist, "history", nv[0].Identity, "--since", want.Since.Format(time.RFC3339Nano))
	if len(hist) <= len(want.History) || !slices.EqualFunc(hist[:len(want.History)], want.History, samePoint) || !hist[len(want.History)].Reload {
		t.Errorf("history of the identity: %d points, want the %d old ones then a reload", len(hist), len(want.History))
	}
	l.stop()
}

// samePoint compares history points by what was stored: time, instance,
// counters.
func samePoint(a, b api.HistoryPoint) bool {
	return a.Time.Equal(b.Time) && a.ID == b.ID && a.Counters == b.Counters && a.Reload == b.Reload
}
