package collectors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// newProgIter loads the iterator sweep and unloads it when the test ends.
func newProgIter(tb testing.TB) *ProgIter {
	tb.Helper()
	it, err := NewProgIter()
	if err != nil {
		tb.Fatalf("load iterator sweep: %v", err)
	}
	tb.Cleanup(func() { it.Close() })
	return it
}

// runTimeStats turns run-time stats on for the test.
func runTimeStats(tb testing.TB) {
	tb.Helper()
	privtest.LockStats(tb)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		tb.Fatalf("enable stats: %v", err)
	}
	tb.Cleanup(func() { stats.Close() })
}

// checkIterMatchesFd takes an fd sweep, an iterator sweep and another fd
// sweep, and checks every program: where both fd sweeps agree (an idle
// program) the iterator's figures equal them; where they differ (a busy
// program) each counter lies between them. Programs loaded or unloaded
// in between are left out. It returns how many idle programs matched.
func checkIterMatchesFd(tb testing.TB, it *ProgIter) (idle int) {
	tb.Helper()
	before, err := Sweep(nil)
	if err != nil {
		tb.Fatalf("fd sweep: %v", err)
	}
	got, err := it.Sweep(nil)
	if err != nil {
		tb.Fatalf("iterator sweep: %v", err)
	}
	after, err := Sweep(nil)
	if err != nil {
		tb.Fatalf("fd sweep: %v", err)
	}
	for _, g := range got {
		b, ok1 := findSample(before, g.ID)
		a, ok2 := findSample(after, g.ID)
		if !ok1 || !ok2 {
			continue
		}
		if g.Type != b.Type || g.Tag != b.Tag || g.Name != b.Name || g.LoadTime != b.LoadTime {
			tb.Errorf("program %d: iterator says type %d tag %x name %q loaded %d; info says %d %x %q %d",
				g.ID, g.Type, g.Tag, g.Name, g.LoadTime, b.Type, b.Tag, b.Name, b.LoadTime)
		}
		if a == b {
			idle++
			if g != b {
				tb.Errorf("idle program %d %q: iterator %+v, info %+v", g.ID, g.Name, g, b)
			}
			continue
		}
		for _, c := range []struct {
			what        string
			lo, got, hi uint64
		}{
			{"run_cnt", b.RunCnt, g.RunCnt, a.RunCnt},
			{"run_time_ns", b.RunTimeNs, g.RunTimeNs, a.RunTimeNs},
			{"recursion_misses", b.RecursionMisses, g.RecursionMisses, a.RecursionMisses},
		} {
			if c.got < c.lo || c.got > c.hi {
				tb.Errorf("busy program %d %q: iterator %s %d not within the info reads %d..%d", g.ID, g.Name, c.what, c.got, c.lo, c.hi)
			}
		}
	}
	// Every program both fd sweeps saw, the iterator saw too.
	for _, b := range before {
		if _, ok := findSample(after, b.ID); ok {
			if _, ok := findSample(got, b.ID); !ok {
				tb.Errorf("iterator misses program %d %q", b.ID, b.Name)
			}
		}
	}
	return idle
}

func TestIterSweepEqualsInfo(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	runs := []int{0, 1, 17, 1000}
	var ids []uint32
	for _, n := range runs {
		prog, id := loadSocketFilter(t, "iter")
		if err := privtest.Run(prog, n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	idle := checkIterMatchesFd(t, it)
	got, err := it.Sweep(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		s, ok := findSample(got, id)
		if !ok {
			t.Fatalf("iterator misses program %d", id)
		}
		if want := uint64(runs[i]); s.RunCnt != want {
			t.Errorf("program %d: run_cnt %d, want %d", id, s.RunCnt, want)
		}
	}
	if idle < len(ids) {
		t.Errorf("only %d idle programs compared, want at least the %d loaded here", idle, len(ids))
	}
	t.Logf("%d idle programs equal, %d programs in all", idle, len(got))
}

// TestIterSweepKeepsNames sweeps 300 idle programs into last sweep's
// buffer, as the daemon does every tick: each keeps its name without a
// string allocated for it, so allocations do not grow with the programs;
// a slot that held another name gets the program's own.
func TestIterSweepKeepsNames(t *testing.T) {
	privtest.Root(t)
	it := newProgIter(t)
	const n = 300
	for range n {
		loadSocketFilter(t, "names")
	}
	buf, err := it.Sweep(nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(5, func() {
		if buf, err = it.Sweep(buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= n/3 {
		t.Errorf("a sweep of %d idle programs into last sweep's buffer made %.0f allocations, want a few (not one a program)", len(buf), allocs)
	}
	// The newest program sweeps last, into the slot after the last
	// sweep's: put a sample there with its id and another name.
	_, id := loadSocketFilter(t, "renamed")
	buf = append(buf, Sample{ID: id, Name: "stale"})
	if buf, err = it.Sweep(buf[:0]); err != nil {
		t.Fatal(err)
	}
	s, ok := findSample(buf, id)
	if !ok || !strings.HasPrefix(s.Name, "renamed") {
		t.Errorf("program %d swept as %q, want its own name", id, s.Name)
	}
	t.Logf("%d programs, %.0f allocations a sweep", len(buf), allocs)
}

// TestIterSweepBusy reads a program while it runs: the iterator's figures
// lie between the fd reads before and after.
func TestIterSweepBusy(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	prog, id := loadSocketFilter(t, "busy")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := privtest.Run(prog, 20); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// Reads go on until the program has moved between two of them 20
	// times (the runner shares two CPUs with the test on small hosts).
	moved := 0
	for deadline := time.Now().Add(10 * time.Second); moved < 20 && time.Now().Before(deadline); {
		before, err := prog.Stats()
		if err != nil {
			t.Fatal(err)
		}
		got, err := it.Sweep(nil)
		if err != nil {
			t.Fatal(err)
		}
		after, err := prog.Stats()
		if err != nil {
			t.Fatal(err)
		}
		g, ok := findSample(got, id)
		if !ok {
			t.Fatalf("iterator misses program %d", id)
		}
		if g.RunCnt < before.RunCount || g.RunCnt > after.RunCount {
			t.Errorf("run_cnt %d not within %d..%d", g.RunCnt, before.RunCount, after.RunCount)
		}
		if g.RunTimeNs < uint64(before.Runtime) || g.RunTimeNs > uint64(after.Runtime) {
			t.Errorf("run_time_ns %d not within %d..%d", g.RunTimeNs, before.Runtime, after.Runtime)
		}
		if after.RunCount > before.RunCount {
			moved++
		}
		time.Sleep(time.Millisecond)
	}
	if moved < 20 {
		t.Errorf("the program ran between two reads only %d times in 10 s: the test proved too little", moved)
	}
	checkIterMatchesFd(t, it)
}

// TestIterSweepEveryCPU runs one program a known number of times on each
// CPU in turn (CPU c runs it c+1 times) and checks the iterator's run
// count is the exact sum, with each CPU's per-CPU offset read from the
// cache the iterator fills on its first run and, with the cache limited
// to CPU 0, computed per program as on a machine past 1,024 CPUs. The VM
// runs it at 16 CPUs (TestIterSweepInVM).
func TestIterSweepEveryCPU(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	for _, cached := range []uint32{0, 1} {
		name := "cached"
		if cached == 1 {
			name = "uncached"
		}
		t.Run(name, func(t *testing.T) {
			it, err := loadProgIter(progIterOptions{cachedCPUs: cached})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			prog, id := loadSocketFilter(t, "everycpu")
			want := uint64(0)
			for i, c := range cpus {
				if err := runOnCPU(prog, c, i+1); err != nil {
					t.Fatal(err)
				}
				want += uint64(i + 1)
			}
			got, err := it.Sweep(nil)
			if err != nil {
				t.Fatal(err)
			}
			g, ok := findSample(got, id)
			if !ok {
				t.Fatalf("iterator misses program %d", id)
			}
			if g.RunCnt != want {
				t.Errorf("run_cnt %d over %d CPUs, want %d", g.RunCnt, len(cpus), want)
			}
			if idle := checkIterMatchesFd(t, it); idle == 0 {
				t.Error("no idle program compared")
			}
		})
	}
}

// runOnCPU runs prog n times from a thread pinned to cpu.
func runOnCPU(prog *ebpf.Program, cpu, n int) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked: it exits with the goroutine rather
		// than going back to the scheduler pinned.
		runtime.LockOSThread()
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			errc <- fmt.Errorf("pin to CPU %d: %w", cpu, err)
			return
		}
		errc <- privtest.Run(prog, n)
	}()
	return <-errc
}

// TestIterSweepRecursionMisses makes the kernel count recursion misses: a
// raw tracepoint program on bpf_trace_printk calls bpf_trace_printk, so
// each run re-enters the tracepoint on the same CPU and the kernel skips
// the nested run as a miss. The iterator must count them as
// OBJ_GET_INFO_BY_FD does.
func TestIterSweepRecursionMisses(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	printk := asm.Instructions{
		asm.Mov.Imm(asm.R1, 0x0a78), // "x\n"
		asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnTracePrintk.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
	rec, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: uniqueName("recur"), Type: ebpf.RawTracepoint, License: "GPL", Instructions: printk})
	if err != nil {
		t.Fatalf("load raw tracepoint program: %v", err)
	}
	defer rec.Close()
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "bpf_trace_printk", Program: rec})
	if err != nil {
		t.Fatalf("attach to bpf_trace_printk: %v", err)
	}
	defer l.Close()
	trigger, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: uniqueName("trig"), Type: ebpf.SocketFilter, License: "GPL", Instructions: printk})
	if err != nil {
		t.Fatalf("load trigger: %v", err)
	}
	defer trigger.Close()
	if err := privtest.Run(trigger, 50); err != nil {
		t.Fatal(err)
	}
	l.Close() // idle from here on
	want, err := rec.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if want.RecursionMisses == 0 {
		t.Fatalf("no recursion misses counted (stats %+v): the kernel no longer counts nested raw tracepoint runs", want)
	}
	got, err := it.Sweep(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := findSample(got, progID(t, rec))
	if !ok {
		t.Fatal("iterator misses the raw tracepoint program")
	}
	if g.RecursionMisses != want.RecursionMisses || g.RunCnt != want.RunCount || g.RunTimeNs != uint64(want.Runtime) {
		t.Errorf("iterator: %d runs %d ns %d misses; info: %d runs %d ns %d misses",
			g.RunCnt, g.RunTimeNs, g.RecursionMisses, want.RunCount, want.Runtime, want.RecursionMisses)
	}
	t.Logf("%d runs, %d recursion misses, equal", g.RunCnt, g.RecursionMisses)
}

func TestIterSweepHoldsNothing(t *testing.T) {
	privtest.Root(t)
	it := newProgIter(t)
	prog, id := loadSocketFilter(t, "ihold")
	before := fdCount(t)
	samples, err := it.Sweep(nil)
	if err != nil {
		t.Fatal(err)
	}
	if after := fdCount(t); after != before {
		t.Errorf("fd count %d after sweep, %d before", after, before)
	}
	if _, ok := findSample(samples, id); !ok {
		t.Fatalf("iterator misses program %d", id)
	}
	self, ok := findSample(samples, it.ProgramID())
	if !ok || self.Name != "bpfperf_progs" {
		t.Errorf("iterator does not list itself as program %d: %+v", it.ProgramID(), self)
	}
	prog.Close()
	samples, err = it.Sweep(samples[:0])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := findSample(samples, id); ok {
		t.Errorf("closed program %d still swept", id)
	}
}

func TestIterLoadErrorKinds(t *testing.T) {
	if err := iterLoadError(unix.EPERM); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("%v does not match ErrNotPermitted", err)
	}
	if err := iterLoadError(errors.New("verifier said no")); !errors.Is(err, ErrIterUnsupported) {
		t.Errorf("%v does not match ErrIterUnsupported", err)
	}
}

// TestIterSweepInVM runs the exactness tests in the test VM (Debian's 6.1)
// at 2 and 16 CPUs, where the per-CPU sum covers many CPUs.
func TestIterSweepInVM(t *testing.T) {
	for _, cpus := range []int{2, 16} {
		t.Run(itoa(uint32(cpus))+"cpus", func(t *testing.T) {
			vmtest.RunTests(t, vmtest.Config{CPUs: cpus}, []string{
				"TestIterSweepEqualsInfo", "TestIterSweepBusy", "TestIterSweepRecursionMisses",
				"TestIterSweepHoldsNothing", "TestIterSweepEveryCPU", "TestHolderIterEqualsScan",
				"TestIterSweepKeepsNames", "TestIterSweepChanged", "TestIterSweepChangedManyPrograms",
			})
		})
	}
}

func TestIterCheck(t *testing.T) {
	privtest.Root(t)
	runTimeStats(t)
	it := newProgIter(t)
	for range 5 {
		loadSocketFilter(t, "check")
	}
	n, err := it.Check(16)
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("check compared %d idle programs, want at least the 5 loaded here", n)
	}
}
