package sampler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestSweeperFallsBackOnMismatch: when a later proof finds the iterator's
// figures differ from OBJ_GET_INFO_BY_FD, the sweeper unloads its iterator,
// says why, and the same tick's sweep is the fd sweep's, exact: a program
// run 7 times reads 7 runs.
func TestSweeperFallsBackOnMismatch(t *testing.T) {
	now := time.Now()
	w, id := iterSweeperBeside(t, now, "sweep_fallback", 7)
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

// TestSweeperRidesOutWalksWithoutATrailer: a changed-only walk that ends
// without its trailer (seen once in CI) costs one tick a full read by the
// iterator, exact (a program run 7 times reads 7 runs), not the iterator
// itself; only maxNoTrailer such walks in a row turn the changed-only
// sweep off, and a good walk between them starts the count again.
func TestSweeperRidesOutWalksWithoutATrailer(t *testing.T) {
	now := time.Now()
	w, id := iterSweeperBeside(t, now, "sweep_notrailer", 7)
	if !w.changedOnly {
		t.Fatal("the iterator's changed-only sweep does not run on this kernel")
	}

	real := w.changed
	fail := true
	w.changed = func(buf []collectors.Sample, all bool) ([]collectors.Sample, collectors.Walk, error) {
		if fail {
			return buf, collectors.Walk{}, fmt.Errorf("%w: simulated", collectors.ErrNoTrailer)
		}
		return real(buf, all)
	}
	sweep := func(what string) {
		t.Helper()
		out, walk, err := w.sweep(nil, now, false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if fail && walk != nil {
			t.Errorf("%s: a walk without a trailer returned a walk", what)
		}
		runs, found := uint64(0), false
		for _, s := range out {
			if s.ID == uint32(id) {
				runs, found = s.RunCnt, true
			}
		}
		if fail && (!found || runs != 7) {
			t.Errorf("%s: program %d found %v with %d runs, want every program read, 7 runs", what, id, found, runs)
		}
		if kind, detail, _, _, _ := w.State(); kind != SweepIter {
			t.Fatalf("%s: sweep %s (%s), want the iterator kept", what, kind, detail)
		}
	}
	for i := 1; i < maxNoTrailer; i++ {
		sweep(fmt.Sprintf("walk %d without a trailer", i))
	}
	fail = false
	sweep("a good walk")
	fail = true
	for i := 1; i < maxNoTrailer; i++ {
		sweep(fmt.Sprintf("walk %d without a trailer after a good one", i))
	}
	if !w.changedOnly {
		t.Fatalf("changed-only sweep off after %d walks in a row without a trailer, want on until %d", maxNoTrailer-1, maxNoTrailer)
	}
	sweep(fmt.Sprintf("walk %d without a trailer", maxNoTrailer))
	if w.changedOnly {
		t.Errorf("changed-only sweep still on after %d walks in a row without a trailer", maxNoTrailer)
	}
}

// iterSweeperBeside starts an iterator sweeper, with stats on, beside a
// socket filter named name run runs times; both go when the test ends.
func iterSweeperBeside(t *testing.T, now time.Time, name string, runs int) (*Sweeper, ebpf.ProgramID) {
	t.Helper()
	statsOn(t)
	w, err := NewSweeper(SweepConfig{Mode: SweepAuto, Logger: discard}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	if kind, detail, _, _, _ := w.State(); kind != SweepIter {
		t.Fatalf("sweep at start: %s (%s), want the iterator on this kernel", kind, detail)
	}
	prog, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	if err := privtest.Run(prog, runs); err != nil {
		t.Fatal(err)
	}
	info, _ := prog.Info()
	id, _ := info.ID()
	return w, id
}
