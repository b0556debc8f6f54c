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
