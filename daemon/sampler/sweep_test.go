package sampler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestSweeperFallsBackOnMismatch: when a later proof finds the iterator's
// figures differ from OBJ_GET_INFO_BY_FD, the sweeper unloads its iterator,
// says why, and the same tick's sweep is the fd sweep's, exact: a program
// run 7 times reads 7 runs.
func TestSweeperFallsBackOnMismatch(t *testing.T) {
	statsOn(t)
	now := time.Now()
	w, err := NewSweeper(SweepConfig{Mode: SweepAuto, Logger: discard}, now)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if kind, detail, _, _, _ := w.State(); kind != SweepIter {
		t.Fatalf("sweep at start: %s (%s), want the iterator on this kernel", kind, detail)
	}

	prog, err := privtest.LoadSocketFilter("sweep_fallback")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if err := privtest.Run(prog, 7); err != nil {
		t.Fatal(err)
	}
	info, _ := prog.Info()
	id, _ := info.ID()

	w.prove = func(int) (int, error) {
		return 0, fmt.Errorf("%w: program %d: simulated", collectors.ErrIterMismatch, id)
	}
	out, _, err := w.sweep(nil, now.Add(iterCheckEvery), true)
	if err != nil {
		t.Fatal(err)
	}
	kind, detail, _, _, _ := w.State()
	if kind != SweepFd || !strings.Contains(detail, "differs from OBJ_GET_INFO_BY_FD") {
		t.Errorf("after a failed proof: sweep %s (%s), want the fd sweep and why", kind, detail)
	}
	if w.IterID() != 0 {
		t.Errorf("iterator still held after falling back")
	}
	var runs uint64
	found := false
	for _, s := range out {
		if s.ID == uint32(id) {
			found, runs = true, s.RunCnt
		}
	}
	if !found || runs != 7 {
		t.Errorf("fd sweep after the fallback: program %d found %v with %d runs, want 7", id, found, runs)
	}
}

// TestSweeperRetriesAProofWithNothingToCompare: a proof that found no idle
// program is not a proof: status says so, and the next one comes within
// seconds, not minutes.
func TestSweeperRetriesAProofWithNothingToCompare(t *testing.T) {
	privtest.Root(t)
	now := time.Now()
	w, err := NewSweeper(SweepConfig{Mode: SweepAuto, Logger: discard}, now)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.IterID() == 0 {
		t.Fatal("the iterator does not run on this kernel")
	}
	proofs := 0
	w.prove = func(int) (int, error) { proofs++; return 0, nil }
	w.sweep(nil, now.Add(iterCheckEvery), true)
	if _, detail, _, _, _ := w.State(); proofs != 1 || !strings.Contains(detail, "not yet compared") {
		t.Errorf("after a proof with nothing idle: %d proofs, detail %q", proofs, detail)
	}
	w.sweep(nil, now.Add(iterCheckEvery+iterRecheckSoon), true)
	if proofs != 2 {
		t.Errorf("no new proof %v later (%d proofs)", iterRecheckSoon, proofs)
	}
}
