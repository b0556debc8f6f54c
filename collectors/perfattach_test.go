package collectors

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// bpftoolPerfAttach is what bpftool perf says pid's perf events run, as
// attach points (tracepoints only: that is all the tests attach).
func bpftoolPerfAttach(t *testing.T, pid int) (map[uint32][]AttachPoint, []privtest.BpftoolPerf) {
	t.Helper()
	var all []privtest.BpftoolPerf
	bpftool(t, &all, "perf", "show")
	out := make(map[uint32][]AttachPoint)
	var mine []privtest.BpftoolPerf
	for _, p := range all {
		if p.PID != pid {
			continue
		}
		mine = append(mine, p)
		if p.FDType == "tracepoint" {
			out[p.ProgID] = appendNew(out[p.ProgID], AttachPoint{Type: "perf_event", Target: "tracepoint " + p.Tracepoint})
		}
	}
	return out, mine
}

// TestPerfEventAttach: bpftrace 0.17, which attaches its tracepoint
// program to a perf event with PERF_EVENT_IOC_SET_BPF and no link, runs a
// program that PerfEventAttach finds on its fds, as bpftool perf does.
// bpftrace's other perf events (its output buffers) carry no program.
func TestPerfEventAttach(t *testing.T) {
	privtest.Root(t)
	for _, tool := range []string{"bpftrace", "bpftool"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, tool+" is not installed")
		}
	}
	privtest.Tracefs(t)
	var stderr bytes.Buffer
	bt := exec.Command("bpftrace", "-e", "tracepoint:syscalls:sys_enter_openat { @c = count(); }")
	bt.Stderr = &stderr
	if err := bt.Start(); err != nil {
		t.Fatalf("start bpftrace: %v", err)
	}
	t.Cleanup(func() {
		bt.Process.Kill()
		bt.Wait()
	})
	pid := bt.Process.Pid

	// bpftrace takes seconds to start: wait until bpftool sees its
	// program on one of its perf events.
	var (
		want    map[uint32][]AttachPoint
		entries []privtest.BpftoolPerf
		btProg  uint32
	)
	for deadline := time.Now().Add(20 * time.Second); btProg == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("bpftrace (pid %d) attached no program to sys_enter_openat in 20 s; bpftool perf: %+v; stderr: %s", pid, entries, stderr.String())
		}
		want, entries = bpftoolPerfAttach(t, pid)
		for id, aps := range want {
			var prog struct {
				Name string `json:"name"`
				Type string `json:"type"`
			}
			bpftool(t, &prog, "prog", "show", "id", itoa(id))
			if prog.Name == "sys_enter_opena" && prog.Type == "tracepoint" && aps[0].Target == "tracepoint sys_enter_openat" {
				btProg = id
			}
		}
	}

	got, err := PerfEventAttach([]int{pid})
	if err != nil {
		t.Fatalf("PerfEventAttach: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PerfEventAttach(bpftrace) = %+v, bpftool perf says %+v", got, want)
	}
	if aps := got[btProg]; len(aps) != 1 || aps[0] != (AttachPoint{Type: "perf_event", Target: "tracepoint sys_enter_openat"}) {
		t.Errorf("PerfEventAttach for bpftrace's program %d = %+v, want one perf_event on tracepoint sys_enter_openat", btProg, aps)
	}

	// Gone when bpftrace ends.
	bt.Process.Kill()
	bt.Wait()
	if got, err := PerfEventAttach([]int{pid}); err != nil || len(got) != 0 {
		t.Errorf("PerfEventAttach for an ended process = %+v, %v; want nothing", got, err)
	}
}

// TestPerfEventAttachReadsAsLink: a tracepoint program attached through a
// perf_event link is reported by both Links and PerfEventAttach, worded
// alike, so MergeAttach lists it once.
func TestPerfEventAttachReadsAsLink(t *testing.T) {
	privtest.Root(t)
	privtest.Tracefs(t)
	prog := loadProg(t, ebpf.TracePoint, ebpf.AttachNone, 0)
	l, err := link.Tracepoint("syscalls", "sys_enter_openat", prog, nil)
	if err != nil {
		t.Fatalf("attach tracepoint: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	id := progID(t, prog)

	links, err := Links()
	if err != nil {
		t.Fatalf("Links: %v", err)
	}
	perf, err := PerfEventAttach([]int{os.Getpid()})
	if err != nil {
		t.Fatalf("PerfEventAttach: %v", err)
	}
	want := AttachPoint{Type: "perf_event", Target: "tracepoint sys_enter_openat"}
	if got := perf[id]; len(got) != 1 || got[0] != want {
		t.Errorf("PerfEventAttach for a linked tracepoint = %+v, want %+v", got, want)
	}
	if got := links[id]; len(got) != 1 || got[0].LinkID == 0 || got[0].Type != want.Type || got[0].Target != want.Target {
		t.Fatalf("Links for a linked tracepoint = %+v, want one link to %s", got, want.Target)
	}
	if got := MergeAttach(links, perf)[id]; len(got) != 1 {
		t.Errorf("merged attach points = %+v, want the link once", got)
	}
}

// TestPerfEventAttachOnce: a program set with PERF_EVENT_IOC_SET_BPF on
// a tracepoint's perf event that the process holds through two fds (as
// after dup, or a fork's child) is one attach point, where bpftool perf
// lists each fd. (One program cannot go on the same tracepoint twice: the
// kernel keeps one program list per tracepoint, on every CPU, and refuses
// a repeat with EEXIST.)
func TestPerfEventAttachOnce(t *testing.T) {
	privtest.Root(t)
	if _, err := exec.LookPath("bpftool"); err != nil {
		privtest.Skip(t, "bpftool is not installed")
	}
	privtest.Tracefs(t)
	raw, err := os.ReadFile("/sys/kernel/tracing/events/syscalls/sys_enter_openat/id")
	if err != nil {
		privtest.Skip(t, "no sys_enter_openat tracepoint: "+err.Error())
	}
	tp, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	prog := loadProg(t, ebpf.TracePoint, ebpf.AttachNone, 0)
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: tp, Sample: 1, Wakeup: 1}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		t.Fatalf("perf_event_open: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, prog.FD()); err != nil {
		t.Fatalf("set bpf: %v", err)
	}
	fd2, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd2) })
	id := progID(t, prog)

	got, err := PerfEventAttach([]int{os.Getpid(), os.Getpid()})
	if err != nil {
		t.Fatalf("PerfEventAttach: %v", err)
	}
	want := []AttachPoint{{Type: "perf_event", Target: "tracepoint sys_enter_openat"}}
	if !reflect.DeepEqual(got[id], want) {
		t.Errorf("PerfEventAttach for one program held through 2 fds = %+v, want %+v", got[id], want)
	}
	bt, entries := bpftoolPerfAttach(t, os.Getpid())
	var fds []int
	for _, e := range entries {
		if e.ProgID == id {
			fds = append(fds, e.FD)
		}
	}
	if slices.Sort(fds); !slices.Equal(fds, []int{min(fd, fd2), max(fd, fd2)}) || !reflect.DeepEqual(bt[id], want) {
		t.Errorf("bpftool perf lists program %d on fds %v as %+v, want fds %d and %d, %+v", id, fds, bt[id], fd, fd2, want)
	}
	if links, err := Links(); err != nil || len(links[id]) != 0 {
		t.Errorf("Links = %+v, %v for a program attached without a link, want none", links[id], err)
	}
}
