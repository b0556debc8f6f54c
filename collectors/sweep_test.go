package collectors

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func findSample(samples []Sample, id uint32) (Sample, bool) {
	i := slices.IndexFunc(samples, func(s Sample) bool { return s.ID == id })
	if i < 0 {
		return Sample{}, false
	}
	return samples[i], true
}

func TestSweepCountsRuns(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enable stats: %v", err)
	}
	defer stats.Close()

	prog, id := loadSocketFilter(t, "sweep")
	const runs = 1237
	if err := privtest.Run(prog, runs); err != nil {
		t.Fatal(err)
	}
	samples, err := Sweep(nil)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	got, ok := findSample(samples, id)
	if !ok {
		t.Fatalf("sweep of %d programs misses program %d", len(samples), id)
	}
	want, err := prog.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got.RunCnt != runs {
		t.Errorf("run_cnt = %d, want %d", got.RunCnt, runs)
	}
	if got.RunTimeNs == 0 || got.RunTimeNs != uint64(want.Runtime) {
		t.Errorf("run_time_ns = %d, want %d (> 0) as prog.Stats reports", got.RunTimeNs, want.Runtime)
	}
	if got.RecursionMisses != want.RecursionMisses {
		t.Errorf("recursion_misses = %d, want %d", got.RecursionMisses, want.RecursionMisses)
	}

	var bt struct {
		Type   string `json:"type"`
		Name   string `json:"name"`
		Tag    string `json:"tag"`
		RunCnt uint64 `json:"run_cnt"`
	}
	bpftool(t, &bt, "prog", "show", "id", itoa(id))
	if got.Name != bt.Name || ProgTypeName(got.Type) != bt.Type || hexTag(got.Tag) != bt.Tag {
		t.Errorf("sweep says name %q type %q tag %s; bpftool says %q %q %s",
			got.Name, ProgTypeName(got.Type), hexTag(got.Tag), bt.Name, bt.Type, bt.Tag)
	}
	if bt.RunCnt != runs {
		t.Errorf("bpftool run_cnt = %d, want %d", bt.RunCnt, runs)
	}
}

func TestSweepHoldsNothing(t *testing.T) {
	privtest.Root(t)
	prog, id := loadSocketFilter(t, "hold")
	before := fdCount(t)
	samples, err := Sweep(nil)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if after := fdCount(t); after != before {
		t.Errorf("fd count %d after sweep, %d before", after, before)
	}
	if _, ok := findSample(samples, id); !ok {
		t.Fatalf("sweep misses program %d", id)
	}

	prog.Close()
	out, err := exec.Command("bpftool", "prog", "show", "id", itoa(id)).CombinedOutput()
	if err == nil {
		t.Errorf("program %d still loaded after its only owner closed it:\n%s", id, out)
	}
	samples, err = Sweep(samples[:0])
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, ok := findSample(samples, id); ok {
		t.Errorf("closed program %d still swept", id)
	}
}

func TestSweepAppends(t *testing.T) {
	privtest.Root(t)
	_, id := loadSocketFilter(t, "append")
	head := []Sample{{ID: 0, Name: "kept"}}
	samples, err := Sweep(head)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if samples[0].Name != "kept" {
		t.Errorf("sweep overwrote buf[0]: %+v", samples[0])
	}
	if _, ok := findSample(samples[1:], id); !ok {
		t.Errorf("sweep misses program %d", id)
	}
	if !slices.IsSortedFunc(samples[1:], func(a, b Sample) int { return int(a.ID) - int(b.ID) }) {
		t.Error("samples not in id order")
	}
}

func TestErrGoneMatchesNotExist(t *testing.T) {
	err := wrapErrno("op", unix.ENOENT)
	if !errors.Is(err, ErrGone) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v does not match ErrGone and os.ErrNotExist", err)
	}
	err = wrapErrno("op", unix.EPERM)
	if !errors.Is(err, ErrNotPermitted) || !errors.Is(err, unix.EPERM) {
		t.Errorf("%v does not match ErrNotPermitted and EPERM", err)
	}
}
