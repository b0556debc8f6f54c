package collectors

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// walkOf is the Walk of samples, as the trailer of the walk that wrote
// them all says it.
func walkOf(samples []Sample) Walk {
	var w Walk
	for _, s := range samples {
		w.Add(s.ID, s.LoadTime)
	}
	return w
}

// sweepChanged runs a changed-only sweep and fails on duplicates: a
// program written twice in one walk (a record shown again after a full
// buffer, and written both times) would be counted twice downstream.
func sweepChanged(t *testing.T, it *ProgIter, all bool) ([]Sample, Walk) {
	t.Helper()
	got, w, err := it.SweepChanged(nil, all)
	if err != nil {
		t.Fatalf("changed-only sweep: %v", err)
	}
	seen := map[uint32]bool{}
	for _, s := range got {
		if seen[s.ID] {
			t.Fatalf("program %d written twice in one walk", s.ID)
		}
		seen[s.ID] = true
	}
	return got, w
}

// staysIdle checks that a changed-only sweep does not write ids, idle
// programs. Other tests load and unload programs meanwhile, and one
// unloaded before them moves them in the walk, which writes them once
// more: a sweep that writes them is taken again, up to three times. One
// that writes idle programs every time fails all three.
func staysIdle(t *testing.T, it *ProgIter, ids ...uint32) {
	t.Helper()
	for range 3 {
		got, _ := sweepChanged(t, it, false)
		written := 0
		for _, id := range ids {
			if _, ok := findSample(got, id); ok {
				written++
			}
		}
		if written == 0 {
			return
		}
	}
	t.Fatalf("idle programs %v written by three sweeps in a row", ids)
}

// TestIterSweepChanged checks the changed-only sweep on real programs:
// the first walk writes every program and its trailer counts exactly
// those; an idle program is not written again, one that ran is, with the
// counters the fd sweep reads; an unloaded one leaves the trailer's count
// and sum short by exactly itself, and those after it in the walk are
// written once; `all` writes every program; the plain sweep between them
// writes every program and no trailer.
func TestIterSweepChanged(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	var progs []*ebpf.Program
	var ids []uint32
	for i := range 3 {
		p, id := loadSocketFilter(t, fmt.Sprintf("changed%d", i))
		progs, ids = append(progs, p), append(ids, id)
	}

	first, w1 := sweepChanged(t, it, false)
	if w1 != walkOf(first) {
		t.Fatalf("first walk: trailer %+v, want %+v from the %d programs it wrote", w1, walkOf(first), len(first))
	}
	for _, id := range ids {
		mustSample(t, first, id)
	}
	staysIdle(t, it, ids...)

	if err := privtest.Run(progs[1], 5); err != nil {
		t.Fatal(err)
	}
	second, _ := sweepChanged(t, it, false)
	s := mustSample(t, second, ids[1])
	if s.RunCnt != 5 {
		t.Errorf("program %d: run_cnt %d, want 5", ids[1], s.RunCnt)
	}
	fd, err := Sweep(nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := findSample(fd, ids[1]); f != s {
		t.Errorf("program %d: changed-only sweep %+v, fd sweep %+v", ids[1], s, f)
	}
	if _, ok := findSample(second, it.ProgramID()); !ok {
		t.Errorf("the iterator's own program (it ran in the last walk) was not written")
	}
	staysIdle(t, it, ids...)

	// What the sampler does: the programs it knows, plus those written
	// that it did not know, are the trailer's unless some went away.
	known, _ := sweepChanged(t, it, true)
	walk := walkOf(known)
	gone := mustSample(t, known, ids[0])
	progs[0].Close()
	third, w3 := sweepChanged(t, it, false)
	walk.Remove(gone.ID, gone.LoadTime)
	for _, s := range third {
		if _, ok := findSample(known, s.ID); !ok {
			walk.Add(s.ID, s.LoadTime)
		}
	}
	if w3 != walk {
		// Other tests load and unload programs too: the trailer is
		// wrong only if a full walk now finds the set we expect.
		all, wAll := sweepChanged(t, it, true)
		if wAll != walkOf(all) {
			t.Fatalf("full walk: trailer %+v, want %+v", wAll, walkOf(all))
		}
		if walkOf(all) == walk {
			t.Fatalf("after unloading program %d: trailer %+v, want %+v", gone.ID, w3, walk)
		}
		t.Logf("other programs came or went meanwhile: trailer %+v, expected %+v", w3, walk)
	}
	for _, id := range ids[1:] {
		if s := mustSample(t, third, id); s != mustSample(t, known, id) {
			t.Errorf("program %d, moved in the walk by the unload: %+v, want %+v as before", id, s, mustSample(t, known, id))
		}
	}
	staysIdle(t, it, ids[1:]...)

	all, wAll := sweepChanged(t, it, true)
	if wAll != walkOf(all) {
		t.Errorf("full walk: trailer %+v, want %+v from the %d programs it wrote", wAll, walkOf(all), len(all))
	}
	mustSample(t, all, ids[2])
	if _, ok := findSample(all, ids[0]); ok {
		t.Errorf("unloaded program %d written", ids[0])
	}

	plain, err := it.Sweep(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plain {
		if s.ID == 0 {
			t.Fatalf("plain sweep wrote a trailer: %+v", s)
		}
	}
	mustSample(t, plain, ids[2])
}

// TestIterSweepChangedManyPrograms checks the changed-only sweep where the
// kernel's 32 KiB buffer fills many times in one walk (2,000 records of
// 64 bytes): a record that does not fit is shown again on the next read()
// and must be written then, once. Every program is written once in the
// first walk, every one again after each ran once (with run_cnt 1), and
// none after that.
func TestIterSweepChangedManyPrograms(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	const n = 2000
	progs := make([]*ebpf.Program, n)
	ids := make([]uint32, n)
	for i := range progs {
		progs[i], ids[i] = loadSocketFilter(t, fmt.Sprintf("many%d", i))
	}
	check := func(round string, want func(Sample) error) {
		t.Helper()
		got, w := sweepChanged(t, it, false)
		missing := 0
		for _, id := range ids {
			s, ok := findSample(got, id)
			if !ok {
				missing++
				continue
			}
			if err := want(s); err != nil {
				t.Fatalf("%s: program %d: %v", round, id, err)
			}
		}
		if missing > 0 {
			t.Fatalf("%s: %d of %d programs not written", round, missing, n)
		}
		if w.Count < n {
			t.Fatalf("%s: trailer counts %d programs, fewer than the %d loaded here", round, w.Count, n)
		}
	}
	check("first walk", func(s Sample) error {
		if s.RunCnt != 0 {
			return fmt.Errorf("run_cnt %d, want 0", s.RunCnt)
		}
		return nil
	})
	for _, p := range progs {
		if err := privtest.Run(p, 1); err != nil {
			t.Fatal(err)
		}
	}
	check("after one run each", func(s Sample) error {
		if s.RunCnt != 1 {
			return fmt.Errorf("run_cnt %d, want 1", s.RunCnt)
		}
		return nil
	})
	staysIdle(t, it, ids...)
}

// mustSample is id's sample in samples.
func mustSample(t *testing.T, samples []Sample, id uint32) Sample {
	t.Helper()
	s, ok := findSample(samples, id)
	if !ok {
		t.Fatalf("no sample of program %d", id)
	}
	return s
}

// TestIterProgramLoadedAfterTheTrailer: the kernel's walk ends with the
// stop call that writes the trailer, but the read() that then looks for
// the end starts the walk again from where it stopped, and shows a
// program loaded in between after the trailer. A changed-only sweep then
// ended without its trailer last (ErrNoTrailer, CI run 24). The program
// must write nothing there, and be new to the next walk.
func TestIterProgramLoadedAfterTheTrailer(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	sweepChanged(t, it, true)
	if err := it.objs.ChangedOnly.Set(uint32(1)); err != nil {
		t.Fatal(err)
	}
	attr := iterCreateAttr{linkFD: uint32(it.link.FD())}
	r, err := bpf(unix.BPF_ITER_CREATE, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		t.Fatal(err)
	}
	fd := int(r)
	defer unix.Close(fd)
	buf := make([]byte, 1<<20)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n == 0 {
			t.Fatalf("read %d bytes (%v) before a read ended with the trailer", n, err)
		}
		if n%recordSize == 0 && decodeRecord(buf[n-recordSize:n]).Type == trailerType {
			break // the walk is done: its trailer went out
		}
	}
	_, id := loadSocketFilter(t, "after_trailer")
	n, err := unix.Read(fd, buf)
	if err != nil || n != 0 {
		var shown []uint32
		for d := buf[:max(n, 0)]; len(d) >= recordSize; d = d[recordSize:] {
			shown = append(shown, decodeRecord(d).ID)
		}
		t.Fatalf("after the trailer: %d bytes (%v), programs %v (loaded since: %d); want the end", n, err, shown, id)
	}
	next, _ := sweepChanged(t, it, false)
	mustSample(t, next, id)
}
