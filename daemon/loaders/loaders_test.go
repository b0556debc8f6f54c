package loaders

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/loadrec"
)

// TestTakeOnceAndBound: a recorded load is handed over once, with the
// loader's cgroup and unit read from /proc while it lives; an unloaded
// program's is forgotten; at maxPending the oldest quarter goes.
func TestTakeOnceAndBound(t *testing.T) {
	l := &Loaders{procRoot: "/proc", log: slog.Default(), pending: map[uint32]collectors.Loader{}}
	at := time.Unix(1000, 0)
	l.loaded(loadrec.Load{ProgID: 7, PID: os.Getpid(), TID: os.Getpid(), Comm: "me", Time: at, Source: loadrec.SourceMap})
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	lo, ok := l.Take(7)
	if !ok || lo.PID != os.Getpid() || lo.Comm != "me" || lo.Cgroup != collectors.CgroupPath(string(cg)) || !lo.At.Equal(at) || lo.Source != "load record, map" {
		t.Errorf("Take(7) = %+v, %v", lo, ok)
	}
	if _, ok := l.Take(7); ok {
		t.Error("a loader handed over twice")
	}
	l.loaded(loadrec.Load{ProgID: 8, PID: 1, Time: at})
	l.unloaded(loadrec.Unload{ProgID: 8})
	if _, ok := l.Take(8); ok {
		t.Error("the loader of a program unloaded before it was taken is still kept")
	}
	for i := range maxPending + 1 {
		l.loaded(loadrec.Load{ProgID: uint32(100 + i), PID: 1, Time: at.Add(time.Duration(i) * time.Millisecond)})
	}
	if want := maxPending - maxPending/4 + 1; len(l.pending) != want {
		t.Errorf("%d loaders kept, want %d: the bound less its oldest quarter, and the newest", len(l.pending), want)
	}
	if _, ok := l.Take(100); ok {
		t.Error("the oldest loader was kept past the bound")
	}
	if _, ok := l.Take(uint32(100 + maxPending)); !ok {
		t.Error("the newest loader was dropped")
	}
	var none *Loaders
	if _, ok := none.Take(1); ok || none.Status() != "off" || none.Close() != nil {
		t.Error("a nil Loaders knows a loader or fails")
	}
}

// fakePods names one container's pod, and records what it was asked.
type fakePods struct {
	pod   *collectors.Pod
	asked []string
}

func (f *fakePods) Lookup(cgroup string) (*collectors.Pod, bool) {
	f.asked = append(f.asked, cgroup)
	return f.pod, false
}

// TestLoaderPod (issue 43): a load in a container asks for its pod as the
// record arrives, from the cgroup's names the record kept where the cgroup
// is gone, and hands the pod over with the loader; a load outside any
// container asks nothing.
func TestLoaderPod(t *testing.T) {
	pod := &collectors.Pod{Namespace: "ns-a", Pod: "loader-7d9f8b6c5-x2k4p", Container: "loader", Workload: "Deployment/loader"}
	f := &fakePods{pod: pod}
	l := &Loaders{procRoot: t.TempDir(), log: slog.Default(), pods: f, pending: map[uint32]collectors.Loader{}}
	tail := "pod0f1e2d3c-4b5a-4697-8877-665544332211/ebeb6f206c6c0123456789abcdef0123456789abcdef0123456789abcdef0123"
	l.loaded(loadrec.Load{ProgID: 7, PID: 40, Comm: "agent", CgroupTail: tail})
	lo, ok := l.Take(7)
	if !ok || lo.Pod != pod || lo.Container != "pod 0f1e2d3c-4b5a-4697-8877-665544332211/ebeb6f206c6c" {
		t.Errorf("Take(7) = %+v, %v; want the pod", lo, ok)
	}
	l.loaded(loadrec.Load{ProgID: 8, PID: 41, Comm: "tool", CgroupTail: "system.slice/tool.service"})
	if lo, _ := l.Take(8); lo.Pod != nil || len(f.asked) != 1 || f.asked[0] != tail {
		t.Errorf("asked %q, loader %+v: want the container's cgroup asked alone", f.asked, lo)
	}
}
