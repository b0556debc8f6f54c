package profile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/perfring"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// hotLine is the line of bpf/profile/hot.c marked HOT.
func hotLine(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("../bpf/profile/hot.c")
	if err != nil {
		tb.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "/* HOT */") {
			return int64(i + 1)
		}
	}
	tb.Fatal("no HOT line in hot.c")
	return 0
}

func progID(tb testing.TB, prog *ebpf.Program) (uint32, *ebpf.ProgramInfo) {
	tb.Helper()
	info, err := prog.Info()
	if err != nil {
		tb.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		tb.Fatal("program has no id")
	}
	return uint32(id), info
}

// loadHotProgram loads hot.c's hot_entry for the test (closed at its end)
// and returns it with its id.
func loadHotProgram(tb testing.TB) (*ebpf.Program, uint32) {
	tb.Helper()
	var objs hotObjects
	if err := loadHotObjects(&objs, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { objs.Close() })
	id, _ := progID(tb, objs.HotEntry)
	return objs.HotEntry, id
}

func newSampler(tb testing.TB, cfg SamplerConfig) *Sampler {
	tb.Helper()
	s, err := NewSampler(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// hotRun is one capture of the hot program running in a loop, shared by
// the tests that look at it.
type hotRun struct {
	id    uint32
	tag   string
	tid   int
	comm  string
	c     *Capture
	p     *profile.Profile
	cpuNS uint64
	// The program's bpf_stats run time over the capture (0 with stats
	// off) and the time between the two reads of it.
	runNS, statsSpan uint64
}

// threadCPU is the time a thread of this process has run, in ns, by its
// own clock (schedstat).
func threadCPU(tid int) uint64 {
	b, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseUint(f[0], 10, 64)
	return n
}

var (
	hotOnce sync.Once
	hot     *hotRun
	hotErr  error
)

func captureHot(t *testing.T) *hotRun {
	privtest.Root(t)
	hotOnce.Do(func() { hot, hotErr = runHot() })
	if hotErr != nil {
		t.Fatal(hotErr)
	}
	return hot
}

func runHot() (*hotRun, error) { return runHotOn(SamplerConfig{Hz: 999}, 2*time.Second) }

// runHotOn captures the hot program spinning for d with a sampler of
// cfg (a hardware event in cfg.Event where a PMU exists).
func runHotOn(cfg SamplerConfig, d time.Duration) (*hotRun, error) {
	var objs hotObjects
	if err := loadHotObjects(&objs, nil); err != nil {
		return nil, err
	}
	defer objs.Close()
	info, err := objs.HotEntry.Info()
	if err != nil {
		return nil, err
	}
	id, _ := info.ID()
	r := &hotRun{id: uint32(id), tag: info.Tag}
	sym := NewSymbolizer(SymbolizerConfig{})
	if err := sym.Learn(r.id); err != nil {
		return nil, err
	}
	s, err := NewSampler(cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	w := spin(&testing.T{}, objs.HotEntry)
	r.tid = w.tid
	comm, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(w.tid) + "/comm")
	r.comm = strings.TrimSpace(string(comm))
	cpu0 := threadCPU(w.tid)
	st0, err0 := objs.HotEntry.Stats()
	t0 := time.Now()
	r.c, err = s.Capture(context.Background(), d)
	st1, err1 := objs.HotEntry.Stats()
	r.statsSpan = uint64(time.Since(t0))
	r.cpuNS = threadCPU(w.tid) - cpu0
	w.Stop()
	if err0 == nil && err1 == nil {
		r.runNS = uint64(st1.Runtime - st0.Runtime)
	}
	if err != nil {
		return nil, err
	}
	if w.err != nil {
		return nil, w.err
	}
	r.p, err = Build(r.c, sym, BuildOptions{})
	return r, err
}

// flatByLine sums the samples whose innermost frame is at each
// "function file:line".
func flatByLine(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
			continue
		}
		l := s.Location[0].Line[0]
		out[l.Function.Name+" "+l.Function.Filename+":"+strconv.FormatInt(l.Line, 10)] += s.Value[0]
	}
	return out
}

// TestHotProgram: a program built from C with BTF, run in a loop: the
// profile names its functions and its hot source line, and labels its
// samples with the program and the thread that ran it.
func TestHotProgram(t *testing.T) {
	r := captureHot(t)
	p := r.p
	if len(p.Sample) == 0 {
		t.Fatal("no samples")
	}
	byLine := flatByLine(p)
	var top string
	for k, v := range byLine {
		if top == "" || v > byLine[top] {
			top = k
		}
	}
	// The file name is the one clang was given, relative to profile/.
	want := "spin ../bpf/profile/hot.c:" + strconv.FormatInt(hotLine(t), 10)
	if top != want {
		t.Errorf("hottest line %q (%d samples), want %q; all: %v", top, byLine[top], want, byLine)
	}
	// Every function of the program shows up, with hot_entry as the
	// caller of the other two. (A sample in a callee's prologue, before it
	// set up its frame pointer, skips the caller: rare.)
	callers := map[string]map[string]int64{}
	var progSamples int64
	for _, s := range p.Sample {
		if ids := s.Label[LabelProgID]; len(ids) != 1 || ids[0] != strconv.Itoa(int(r.id)) {
			continue // other programs on the host
		}
		progSamples += s.Value[0]
		leaf := s.Location[0].Line[0].Function.Name
		if callers[leaf] == nil {
			callers[leaf] = map[string]int64{}
		}
		if len(s.Location) > 1 && len(s.Location[1].Line) > 0 {
			callers[leaf][s.Location[1].Line[0].Function.Name] += s.Value[0]
		}
		if got := s.Label[LabelProgName]; len(got) != 1 || got[0] != "hot_entry" {
			t.Errorf("prog_name %v", got)
		}
		if got := s.Label[LabelProgTag]; len(got) != 1 || got[0] != r.tag {
			t.Errorf("prog_tag %v, want %s", got, r.tag)
		}
		if got := s.Label[LabelPID]; len(got) != 1 || got[0] != strconv.Itoa(os.Getpid()) {
			t.Errorf("pid %v, want %d", got, os.Getpid())
		}
		if got := s.Label[LabelComm]; len(got) != 1 || got[0] != r.comm {
			t.Errorf("comm %v, want %s", got, r.comm)
		}
		if cpu, err := strconv.Atoi(s.Label[LabelCPU][0]); err != nil || cpu < 0 || cpu >= r.c.CPUs {
			t.Errorf("cpu %v", s.Label[LabelCPU])
		}
	}
	for _, leaf := range []string{"spin", "warm"} {
		var all int64
		for _, n := range callers[leaf] {
			all += n
		}
		if all == 0 || callers[leaf]["hot_entry"] < all*9/10 {
			t.Errorf("%s's callers: %v, want hot_entry", leaf, callers[leaf])
		}
	}
	// spin loops ten times longer than warm.
	if byFunc := funcSamples(p); byFunc["spin"] < 4*byFunc["warm"] || byFunc["warm"] == 0 {
		t.Errorf("samples by function: %v", byFunc)
	}
	// The workload keeps one CPU busy with the program, less the test-run
	// syscall's own cost: most of its thread's samples are in the
	// program, and the share is what those samples stand for. That is
	// not about 100% where the host stalls the vCPU (9.7% once, in the
	// 16-vCPU TCG guest on a loaded 2-CPU host; see TestCaptureCounts).
	shares, err := ProgramShares(p)
	if err != nil {
		t.Fatal(err)
	}
	thread := 0
	for _, s := range r.c.Samples {
		if int(s.TID) == r.tid {
			thread++
		}
	}
	wantShare := 100 * float64(progSamples) * float64(r.c.Period) / float64(r.c.Duration)
	if progSamples*2 < int64(thread) || math.Abs(shares[r.id]-wantShare) > 0.01*wantShare || shares[r.id] > 101 {
		t.Errorf("program share %.1f%% of one CPU, want %.1f%% (%d samples in it of its thread's %d)", shares[r.id], wantShare, progSamples, thread)
	}
	t.Logf("%d samples in the program, share %.1f%% of a CPU, hottest %s", progSamples, shares[r.id], top)
}

func funcSamples(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			out[s.Location[0].Line[0].Function.Name] += s.Value[0]
		}
	}
	return out
}

// TestCaptureCounts: cpu-clock samples every online CPU (one ring each)
// at most Hz times a second, the busy CPU near that, and the sampler drops
// none. It holds on any CPU count: an idle CPU may give no samples at all
// (on a 16-CPU machine, 9 idle CPUs gave none in 2 s).
func TestCaptureCounts(t *testing.T) {
	r := captureHot(t)
	c := r.c
	cpus, err := perfring.OnlineCPUs("/sys")
	if err != nil {
		t.Fatal(err)
	}
	// None lost, but in the 16-vCPU TCG guest on a 2-CPU host, where the
	// reader's vCPU goes unrun for long stretches: there a loss is
	// counted (Lost, as status shows it), not failed on (CI read 109 and
	// 1,612 lost of 21,553 and 16,710 on a busy host).
	if c.CPUs != len(cpus) || (c.Lost != 0 && !vmtest.InVM()) {
		t.Errorf("CPUs %d (want %d), lost %d", c.CPUs, len(cpus), c.Lost)
	}
	t.Logf("CPUs %d, lost %d", c.CPUs, c.Lost)
	// cpu-clock fires Hz times a second on a busy CPU, but a timer that
	// fires late skips samples (perf's too), and an idle CPU in a tickless
	// kernel may not fire at all. In a VM, a vCPU the host does not run
	// fires late too, and the guest cannot tell: its clocks, schedstat
	// included, count that time as run. (In the 16-vCPU TCG guest on a
	// 2-CPU host the workload's thread ran 1.94 s by schedstat and got
	// 1,243 samples; on a loaded host 797 in 2.16 s.) So: no CPU above
	// its due, samples only from online CPUs, none lost, the workload's
	// thread (on one CPU at a time) neither, and sampled at Hz while it
	// runs: a late timer makes one gap between its samples longer, not
	// the others, so gaps of one period are the most common multiple.
	// (Its schedstat is no bound either way: it leaves out interrupts'
	// time where IRQ time is accounted; 1,841 samples in 1.79 s.)
	due := float64(c.Hz) * c.Duration.Seconds()
	t.Logf("%d samples in %v on %d CPUs at %d Hz", len(c.Samples), c.Duration, c.CPUs, c.Hz)
	online := map[uint32]bool{}
	for _, cpu := range cpus {
		online[uint32(cpu)] = true
	}
	perCPU := map[uint32]int{}
	workload := map[uint32][]uint64{} // the thread's sample times by CPU
	n := 0
	for _, s := range c.Samples {
		perCPU[s.CPU]++
		if int(s.TID) == r.tid {
			workload[s.CPU] = append(workload[s.CPU], s.Time)
			n++
		}
		if s.Period != c.Period {
			t.Fatalf("sample period %d, want %d", s.Period, c.Period)
		}
	}
	for cpu, n := range perCPU {
		if !online[cpu] || float64(n) > 1.02*due {
			t.Errorf("cpu %d (online %v): %d samples, due %.0f", cpu, online[cpu], n, due)
		}
	}
	if n == 0 || float64(n) > 1.02*due {
		t.Errorf("workload thread: %d samples, due %.0f", n, due)
	}
	// Gaps by the nearest multiple of 1/Hz (a sample's time is when the
	// timer's interrupt ran, so within 10%).
	period := float64(time.Second) / float64(c.Hz)
	multiples := map[int]int{}
	for _, times := range workload {
		slices.Sort(times)
		for i := 1; i < len(times); i++ {
			k := float64(times[i]-times[i-1]) / period
			if m := math.Round(k); m >= 1 && math.Abs(k-m) <= 0.1 {
				multiples[int(m)]++
			}
		}
	}
	// At the rate reported, gaps of an odd number of periods are common;
	// at half of it (Hz/2 reported as Hz) every gap is even. Not "one
	// period the most common": in the 16-CPU VM on a busy host the
	// thread's vCPU runs in slices, and CI once read 8 periods the most
	// common with odd gaps 49% of all.
	odd, all := 0, 0
	for m, n := range multiples {
		all += n
		if m%2 == 1 {
			odd += n
		}
	}
	t.Logf("workload thread: %d samples in %v of its CPU time; gaps by multiple of 1/Hz: %v", n, time.Duration(r.cpuNS), multiples)
	if multiples[1] == 0 || 4*odd < all {
		t.Errorf("workload thread: %d of %d gaps an odd number of periods, %d of one: want a quarter or more, and some of one: %v", odd, all, multiples[1], multiples)
	}
}

// TestTailCallChain: each program of a three-program tail-call chain gets
// its own samples, though the kernel charges the chain's run time to the
// entry program.
func TestTailCallChain(t *testing.T) {
	privtest.Root(t)
	tailCallChain(t, SamplerConfig{Hz: 999})
}

// TestTailCallChainCycles: TestTailCallChain on cycles, where a PMU
// exists (the arm64 VM: TestPMUInVM), at 99 Hz as TestCycles.
func TestTailCallChainCycles(t *testing.T) {
	privtest.Root(t)
	privtest.PMU(t)
	tailCallChain(t, SamplerConfig{Event: perfevent.Cycles, Hz: 99})
}

// tailCallChain profiles the chain spinning on cfg's event: each program
// gets about a third of the chain's share (eventShares), and samples in
// a target are labelled with it.
func tailCallChain(t *testing.T, cfg SamplerConfig) {
	var objs chainObjects
	if err := loadChainObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	if err := objs.Chain.Put(uint32(1), objs.ChainB); err != nil {
		t.Fatal(err)
	}
	if err := objs.Chain.Put(uint32(2), objs.ChainC); err != nil {
		t.Fatal(err)
	}
	sym := NewSymbolizer(SymbolizerConfig{})
	ids := map[string]uint32{}
	for name, prog := range map[string]*ebpf.Program{"chain_a": objs.ChainA, "chain_b": objs.ChainB, "chain_c": objs.ChainC} {
		id, _ := progID(t, prog)
		ids[name] = id
		if err := sym.Learn(id); err != nil {
			t.Fatal(err)
		}
	}
	s := newSampler(t, cfg)
	w := spin(t, objs.ChainA)
	c, err := s.Capture(context.Background(), 2*time.Second)
	w.check(t)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(c, sym, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.SampleType[1].Type != cfg.Event.String() && cfg.Event != perfevent.CPUClock {
		t.Errorf("sample types %v, want %v", p.SampleType, cfg.Event)
	}
	shares := eventShares(t, c, p)
	var total float64
	for _, id := range ids {
		total += shares[id]
	}
	for name, id := range ids {
		if shares[id] < total/5 {
			t.Errorf("%s (id %d): %.1f%% of a CPU, want about a third of the chain's %.1f%%", name, id, shares[id], total)
		}
	}
	// Samples in a target are labelled with the target, and its frames
	// are its own.
	for _, smp := range p.Sample {
		name := smp.Label[LabelProgName]
		if leaf := smp.Location[0].Line[0].Function.Name; strings.HasPrefix(leaf, "chain_") && (len(name) != 1 || leaf != name[0]) {
			t.Errorf("sample in %s labelled %v", leaf, name)
		}
	}
	t.Logf("%v shares (%d samples): a %.1f%%, b %.1f%%, c %.1f%%", c.Event, len(c.Samples), shares[ids["chain_a"]], shares[ids["chain_b"]], shares[ids["chain_c"]])
}

// eventShares is each program's share of a capture in % of one CPU:
// ProgramShares on cpu-clock; on a hardware event, the program's share of
// all the event counted on the capture's CPUs (its samples' periods over
// every sample's, user mode and idle included), times the CPUs. On cycles
// that is its share of CPU time where cycles run at one rate, as QEMU's
// do (a 1 GHz virtual clock: TestCycles); a cycles profile has no
// cpu/nanoseconds value, so ProgramShares refuses it.
func eventShares(t *testing.T, c *Capture, p *profile.Profile) map[uint32]float64 {
	t.Helper()
	if c.Event == perfevent.CPUClock {
		shares, err := ProgramShares(p)
		if err != nil {
			t.Fatal(err)
		}
		return shares
	}
	est, _, err := ProgramEstimates(p)
	if err != nil {
		t.Fatal(err)
	}
	// Build scales a multiplexed event's values by time enabled / running.
	all := eventTotal(c)
	if c.RunningShare > 0 && c.RunningShare < 1 {
		all /= c.RunningShare
	}
	shares := map[uint32]float64{}
	if all == 0 {
		return shares
	}
	for id, e := range est {
		shares[id] = 100 * float64(c.CPUs) * e.Total / all
	}
	return shares
}

// eventTotal is what c's event counted on its CPUs: every sample's
// period, summed.
func eventTotal(c *Capture) float64 {
	all := 0.0
	for _, s := range c.Samples {
		all += float64(s.Period)
	}
	return all
}

// TestUnloadedMidCapture: programs nobody told the symbolizer about, run
// and unloaded while a capture runs, resolve to their functions and lines
// however late their samples are read: one loaded before the capture
// starts, one loaded while it runs. The rings are drained once a second
// here, so each program's samples are read after it is gone: a
// symbolizer that learned programs from their drained samples named them
// through kallsyms without lines, or not at all (CI saw both).
func TestUnloadedMidCapture(t *testing.T) {
	privtest.Root(t)
	sym := NewSymbolizer(SymbolizerConfig{})
	s := newSampler(t, SamplerConfig{Hz: 999, Symbolizer: sym, RingPages: 1024})
	drains := &drainCount{}
	s.tap = drains
	if d := drainInterval(999, 1024); d < time.Second {
		t.Fatalf("drains every %v, want a second", d)
	}
	var before hotObjects
	if err := loadHotObjects(&before, nil); err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	type result struct {
		c   *Capture
		err error
	}
	done := make(chan result, 1)
	on := make(chan struct{})
	go func() {
		c, err := s.capture(ctx, time.Minute, func() { close(on) })
		done <- result{c, err}
	}()
	<-on // every CPU samples: under a loaded TCG host enabling took seconds

	var ids []uint32
	threads := map[uint32]bool{}
	run := func(objs *hotObjects) {
		id, _ := progID(t, objs.HotEntry)
		n := drains.n.Load()
		w := spin(t, objs.HotEntry)
		cpu0 := threadCPU(w.tid) // a thread the runtime had, maybe used
		// A third of a drain interval by the thread's clock, started
		// right after a drain (or the start), so it unloads before the
		// next. That clock runs on while the host stalls the vCPU: on a
		// loaded host the thread gets a fraction of the 300 samples.
		privtest.WaitFor(t, "the workload to run", func() bool { return threadCPU(w.tid)-cpu0 >= uint64(300*time.Millisecond) })
		w.check(t)
		ids = append(ids, id)
		threads[uint32(w.tid)] = true
		objs.Close()
		privtest.WaitFor(t, "program unload", func() bool {
			_, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			return errors.Is(err, os.ErrNotExist)
		})
		t.Logf("program %d ran and unloaded with %d drains meanwhile", id, drains.n.Load()-n)
	}
	run(&before)
	var during hotObjects
	if err := loadHotObjects(&during, nil); err != nil {
		t.Fatal(err)
	}
	defer during.Close()
	// A drain passes while it is loaded and idle: no sample shows it.
	// Two are counted: a drain counts as it ends, and the first to end
	// may have looked for new programs before this one loaded (in the
	// 16-CPU VM a drain of a second's samples takes a good part of the
	// second; CI saw it: no sample of this program resolved).
	n := drains.n.Load()
	privtest.WaitFor(t, "a drain that began after the load", func() bool { return drains.n.Load() > n+1 })
	run(&during)
	stop()
	res := <-done
	if res.err != nil && !errors.Is(res.err, context.Canceled) {
		t.Fatal(res.err)
	}

	// Every sample of the workload threads in a program is in one of
	// the two, named with lines, most at the hot line.
	hot := hotLine(t)
	inProg, atHot := map[uint32]int{}, map[uint32]int{}
	unnamed := 0
	for _, smp := range res.c.Samples {
		if !threads[smp.TID] || len(smp.Stack) == 0 {
			continue
		}
		leaf := sym.Lookup(smp.Stack[0], smp.Time)
		if !leaf.BPF() {
			continue
		}
		if !slices.Contains(ids, leaf.ProgID) || leaf.Line == 0 {
			// Named through kallsyms (bpf_prog_<tag>_spin), not at
			// all, or as another program; not a trampoline.
			if leaf.ProgID != 0 || leaf.Func == "" || strings.HasPrefix(leaf.Func, "bpf_prog_") {
				unnamed++
			}
			continue
		}
		inProg[leaf.ProgID]++
		if leaf.Func == "spin" && leaf.Line == hot {
			atHot[leaf.ProgID]++
		}
	}
	t.Logf("samples in programs %v: %v, at the hot line %v, not resolved with a line %d", ids, inProg, atHot, unnamed)
	for _, id := range ids {
		if atHot[id] == 0 {
			t.Errorf("program %d: %d samples resolved to it with lines, none at hot.c:%d", id, inProg[id], hot)
		}
	}
	if unnamed > 0 {
		t.Errorf("%d samples in the programs not resolved to them with lines", unnamed)
	}
	// The built profile says so too.
	p, err := Build(res.c, sym, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := "spin ../bpf/profile/hot.c:" + strconv.FormatInt(hot, 10)
	if byLine := flatByLine(p); byLine[key] == 0 {
		t.Errorf("no samples at %s: %v", key, byLine)
	}
	shares, _ := ProgramShares(p)
	for _, id := range ids {
		if shares[id] == 0 {
			t.Errorf("no share for program %d: %v", id, shares)
		}
	}
}

// drainCount counts a capture's drains.
type drainCount struct{ n atomic.Int64 }

func (d *drainCount) drained(*Capture, []Sample, uint64) { d.n.Add(1) }
func (d *drainCount) ended(*Capture)                     {}
func (d *drainCount) pending() bool                      { return false }
func (d *drainCount) wakeCapture() <-chan struct{}       { return nil }

// TestAgreesWithPerf: over the same workload, the program's share of all
// samples agrees with `perf record -a -g -e cpu-clock` + `perf report`
// within 3 points.
func TestAgreesWithPerf(t *testing.T) {
	privtest.Root(t)
	perf, err := exec.LookPath("perf")
	if err != nil {
		privtest.Skip(t, "perf is not installed (linux-perf)")
	}
	var objs hotObjects
	if err := loadHotObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	id, _ := progID(t, objs.HotEntry)
	sym := NewSymbolizer(SymbolizerConfig{})
	if err := sym.Learn(id); err != nil {
		t.Fatal(err)
	}
	s := newSampler(t, SamplerConfig{Hz: 999})
	// Two tries: on a host whose other vCPU runs other packages' tests,
	// one 4 s window in CI read ours 94.35% against perf's 89.82%, where
	// runs here agree within 0.4 points. A fault in how we attribute
	// samples shows in both tries; each try's log names both sides'
	// innermost functions outside the program, and our lost samples.
	for try := 1; ; try++ {
		oursPct, perfPct := agreeWithPerf(t, perf, s, sym, id, objs.HotEntry)
		// 3 points: about five standard deviations of the difference of
		// two independent samplings of a 92% share in 3,900 samples each.
		d := oursPct - perfPct
		if d <= 3 && d >= -3 {
			return
		}
		if try == 2 {
			t.Fatalf("ours %.2f%%, perf %.2f%%: more than 3 points apart in two tries", oursPct, perfPct)
		}
		t.Logf("try %d: ours %.2f%%, perf %.2f%%: more than 3 points apart; again", try, oursPct, perfPct)
	}
}

// agreeWithPerf captures 4 s with s and with perf at once while prog
// spins, and returns the program's share of all samples by each.
func agreeWithPerf(t *testing.T, perf string, s *Sampler, sym *Symbolizer, id uint32, prog *ebpf.Program) (oursPct, perfPct float64) {
	t.Helper()
	w := spin(t, prog)

	// perf stamps samples with CLOCK_BOOTTIME too (-k boottime), so both
	// are compared over exactly the same window: on these VMs a vCPU
	// the host stops for a while loses samples, and windows that differ
	// at their edges would see different losses.
	data := filepath.Join(t.TempDir(), "perf.data")
	const seconds = 4
	rec := exec.Command(perf, "record", "-a", "-g", "-e", "cpu-clock", "-F", "999", "-k", "boottime",
		"-o", data, "--", "sleep", strconv.Itoa(seconds))
	rec.Stderr = &strings.Builder{}
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := s.Capture(context.Background(), seconds*time.Second)
	if werr := rec.Wait(); werr != nil {
		t.Fatalf("perf record: %v: %s", werr, rec.Stderr)
	}
	w.check(t)
	if err != nil {
		t.Fatal(err)
	}
	// perf's samples with their call chains, so that both sides count a
	// sample by one rule: the program's when the innermost JITed BPF frame
	// of its chain is the program's. perf report's per-symbol rows count
	// by the interrupted instruction alone, and charge an interrupt taken
	// inside the program to the interrupt's handler: up to 2.4 points
	// apart from ours on a busy host for that alone.
	script, err := exec.Command(perf, "script", "-i", data, "-F", "time,ip,sym").Output()
	if err != nil {
		// CI once saw exit status 242 and nothing more: say what perf said.
		var exit *exec.ExitError
		var stderr []byte
		if errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		t.Fatalf("perf script: %v: %s", err, stderr)
	}
	perfSamples := perfChains(t, script)
	if len(perfSamples) < 2 {
		t.Fatalf("perf recorded %d samples", len(perfSamples))
	}
	from := max(perfSamples[0].time, c.Samples[0].Time)
	to := min(perfSamples[len(perfSamples)-1].time, c.Samples[len(c.Samples)-1].Time)
	if to < from+uint64(time.Second) {
		t.Fatalf("perf and the capture overlap for only %v", time.Duration(to-from))
	}

	// Ours: samples whose innermost BPF frame is the program, of all.
	var ours, all int
	oursBPF := map[string]int{}  // the innermost BPF function's name, for the log
	oursElse := map[string]int{} // the innermost function of the rest
	for _, smp := range c.Samples {
		if smp.Time < from || smp.Time > to {
			continue
		}
		all++
		prog := false
		for _, a := range smp.Stack {
			if f := sym.Lookup(a, smp.Time); f.ProgID != 0 {
				oursBPF[f.Func]++
				if f.ProgID == id {
					ours++
					prog = true
				}
				break
			}
		}
		if !prog {
			oursElse[innermost(smp.Stack, func(a uint64) string { return sym.Lookup(a, smp.Time).Func })]++
		}
	}
	oursPct = 100 * float64(ours) / float64(all)

	// perf names JITed code bpf_prog_<tag>_<function>; a subprogram has a
	// tag of its own. Shares are by sample count, as ours are: perf's
	// percentages weigh each sample by its period, and a vCPU the host
	// stalled gives the next sample a longer one.
	bpf := regexp.MustCompile(`^bpf_prog_[0-9a-f]{16}_(.*)$`)
	var perfProg, perfAll int
	perfBPF := map[string]int{}
	perfElse := map[string]int{}
	for _, smp := range perfSamples {
		if smp.time < from || smp.time > to {
			continue
		}
		perfAll++
		prog := false
		for _, fn := range smp.syms {
			if m := bpf.FindStringSubmatch(fn); m != nil {
				perfBPF[m[1]]++
				if m[1] == "hot_entry" || m[1] == "spin" || m[1] == "warm" {
					perfProg++
					prog = true
				}
				break
			}
		}
		if !prog {
			fn := "(user)"
			if len(smp.syms) > 0 {
				fn = smp.syms[0]
			}
			perfElse[fn]++
		}
	}
	if perfAll == 0 {
		t.Fatalf("perf has no samples in the capture's window")
	}
	perfPct = 100 * float64(perfProg) / float64(perfAll)
	t.Logf("program share of all samples from %d to %d ns: ours %.2f%% (%d of %d; %d lost, %d throttled), perf %.2f%% (%d of %d); innermost BPF functions: ours %v, perf %v; the rest's innermost functions: ours %v, perf %v",
		from, to, oursPct, ours, all, c.Lost, c.Throttled, perfPct, perfProg, perfAll, oursBPF, perfBPF, top(oursElse, 6), top(perfElse, 6))
	if perfProg == 0 {
		t.Fatalf("perf has no sample in the program")
	}
	return oursPct, perfPct
}

// innermost names a stack's innermost frame, "(user)" for none.
func innermost(stack []uint64, name func(uint64) string) string {
	if len(stack) == 0 {
		return "(user)"
	}
	return name(stack[0])
}

// top is the n largest counts of m, for a log line.
func top(m map[string]int, n int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return m[b] - m[a] })
	var b strings.Builder
	for i, k := range keys {
		if i == n {
			fmt.Fprintf(&b, " ...")
			break
		}
		fmt.Fprintf(&b, " %s:%d", k, m[k])
	}
	return "[" + strings.TrimSpace(b.String()) + "]"
}

// perfSample is one sample of perf script's output: its time
// (CLOCK_BOOTTIME ns, as recorded with -k boottime) and its call chain's
// symbols, innermost first.
type perfSample struct {
	time uint64
	syms []string
}

// perfChains parses `perf script -F time,ip,sym` of a recording made
// with -g: a "SECONDS.MICROS:" line per sample, then one "ADDR SYMBOL"
// line per frame, then a blank line.
func perfChains(t *testing.T, out []byte) []perfSample {
	t.Helper()
	var samples []perfSample
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasSuffix(line, ":"):
			secs, err := strconv.ParseFloat(strings.TrimSuffix(line, ":"), 64)
			if err != nil {
				t.Fatalf("perf script: %q", line)
			}
			samples = append(samples, perfSample{time: uint64(math.Round(secs * 1e9))})
		case len(samples) > 0:
			if _, fn, ok := strings.Cut(line, " "); ok {
				last := &samples[len(samples)-1]
				last.syms = append(last.syms, fn)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("perf script: %v", err)
	}
	return samples
}

// TestPprofTool: a built profile written to a file is one `go tool pprof`
// reads: -top, -lines, -traces and the web UI all work on it.
func TestPprofTool(t *testing.T) {
	r := captureHot(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go tool in PATH")
	}
	file := filepath.Join(t.TempDir(), "cpu.pb.gz")
	b, err := Marshal(r.p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Mapping) != 2 || back.Mapping[0].File != MappingBPF || back.Mapping[1].File != MappingKernel {
		t.Errorf("mappings after round trip: %v", back.Mapping)
	}
	for _, s := range back.Sample {
		if ids := s.Label[LabelProgID]; len(ids) != 1 || ids[0] != strconv.Itoa(int(r.id)) {
			continue // other programs on the host
		}
		for _, k := range []string{LabelProgID, LabelProgName, LabelProgTag, LabelPID, LabelComm, LabelCPU} {
			if len(s.Label[k]) != 1 {
				t.Fatalf("sample without label %s after round trip: %v", k, s.Label)
			}
		}
	}

	hot := "hot.c:" + strconv.FormatInt(hotLine(t), 10)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-top"}, []string{"spin", "warm", "hot_entry", "Type: cpu", "Duration: 2"}},
		{[]string{"-top", "-lines"}, []string{"spin", hot}},
		{[]string{"-traces"}, []string{"spin", "hot_entry", "bpf_test_run", "prog_name:  hot_entry", "prog_tag:  " + r.tag, "comm:", "cpu:"}},
		{[]string{"-top", "-tagfocus", "prog_name=hot_entry"}, []string{"spin"}},
	} {
		args := append([]string{"tool", "pprof"}, tc.args...)
		out, err := exec.Command(goBin, append(args, file)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof %v: %v\n%s", tc.args, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("go tool pprof %v: no %q in\n%s", tc.args, w, out)
			}
		}
	}

	// The web UI serves the profile on localhost (pprof prints the address
	// it was given, so it gets a free port).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ui := exec.Command(goBin, "tool", "pprof", "-http="+addr, "-no_browser", file)
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ui.Process.Kill(); ui.Wait() }()
	var resp *http.Response
	privtest.WaitFor(t, "pprof web UI", func() bool {
		resp, err = http.Get("http://" + addr + "/ui/top")
		if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
		return err == nil
	})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "spin") {
		t.Errorf("pprof web UI /ui/top: %s\n%.500s", resp.Status, body)
	}
}

// TestCycles: where a PMU exists, a cycles profile of the hot program
// spinning puts its hottest line on the loop marked HOT, as cpu-clock does
// (TestHotProgram), in a profile whose second sample type is cycles, and
// the program's share of the capture's cycles (eventShares) is within 10%
// of its CPU share by bpf_stats (run time over the same span). At 99
// Hz: in a VM each hardware sample is a VM exit, and 999 Hz of three
// events once brought a soft lockup (DESIGN.md). It runs in the arm64 VM
// under icount (TestPMUInVM), where cycles are a 1 GHz clock of virtual
// time, the time the guest's clocks and bpf_stats read; no x86 host we
// have has a PMU: elsewhere it skips through privtest.PMU.
func TestCycles(t *testing.T) {
	privtest.Root(t)
	privtest.PMU(t)
	privtest.LockStats(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		privtest.Skip(t, "BPF_ENABLE_STATS: "+err.Error())
	}
	defer stats.Close()
	// A thread spinning in user mode beside the program, so that its
	// share is not all of a CPU (97% in the one-vCPU VM): a share of the
	// wrong denominator (the BPF samples, the samples in the kernel)
	// would read near 100% all the same. 8 s: at 99 Hz, about 780
	// samples, where a share near 63% is off by 1.7 points (2.7%) at one
	// binomial standard deviation, so 10% is 3.7 of them (in 4 s, 2.6:
	// 65.7% against 63.1% by bpf_stats once in three runs).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		for n := 0; ; n++ {
			if n%1024 == 0 {
				select {
				case <-stop:
					return
				default:
				}
			}
		}
	}()
	r, err := runHotOn(SamplerConfig{Event: perfevent.Cycles, Hz: 99}, 8*time.Second)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// What the cycles stand for: per CPU and second of the capture, the
	// cycles all its samples counted (1e9 in QEMU's virtual clock).
	perSec := eventTotal(r.c) / r.c.Duration.Seconds() / float64(r.c.CPUs)
	share := eventShares(t, r.c, r.p)[r.id]
	statsShare := 100 * float64(r.runNS) / float64(r.statsSpan)
	t.Logf("%d samples in %v on %d CPUs, %.4g cycles a second a CPU; program: %.1f%% of a CPU by cycles, %.1f%% by bpf_stats (%v in %v)",
		len(r.c.Samples), r.c.Duration, r.c.CPUs, perSec, share, statsShare, time.Duration(r.runNS), time.Duration(r.statsSpan))
	if r.runNS == 0 || math.Abs(share-statsShare) > 0.1*statsShare {
		t.Errorf("program share %.1f%% of a CPU by cycles, %.1f%% by bpf_stats: more than 10%% apart", share, statsShare)
	}
	if r.p.SampleType[1].Type != "cycles" {
		t.Errorf("sample types %v", r.p.SampleType)
	}
	byLine := flatByLine(r.p)
	var top string
	for k, v := range byLine {
		if top == "" || v > byLine[top] {
			top = k
		}
	}
	if want := "spin ../bpf/profile/hot.c:" + strconv.FormatInt(hotLine(t), 10); top != want {
		t.Errorf("hottest line on cycles %q (%d), want %q; all: %v", top, byLine[top], want, byLine)
	}
}

// TestHardwareEventsRefused: where there is no PMU (our hosts), sampling
// on cycles, instructions or LLC misses is refused with ErrNoPMU, an
// *OpenError naming the event, which is what the daemon and the CLI
// explain to users.
func TestHardwareEventsRefused(t *testing.T) {
	privtest.Root(t)
	if privtest.NoPMU(t) == "" {
		t.Skip("this machine has a PMU: TestCycles and TestHardwareEvents sample on it")
	}
	for _, ev := range []perfevent.Event{perfevent.Cycles, perfevent.Instructions, perfevent.LLCMisses} {
		s, err := NewSampler(SamplerConfig{Event: ev})
		if err == nil {
			s.Close()
		}
		var pe *perfevent.OpenError
		if !errors.Is(err, perfevent.ErrNoPMU) || !errors.As(err, &pe) || pe.Event != ev {
			t.Errorf("%v: error %v, want an ErrNoPMU *perfevent.OpenError for it", ev, err)
		}
	}
}

// TestCaptureBusyPrivileged: a real sampler refuses a second capture while
// one runs.
func TestCaptureBusyPrivileged(t *testing.T) {
	privtest.Root(t)
	checkBusy(t, newSampler(t, SamplerConfig{}))
}

// TestHardwareEvents: where a PMU exists, instructions sampling of the
// hot program spinning lands in it (its samples are most of the capture's,
// as on cpu-clock), and LLC-miss sampling builds a profile of that type.
// LLC misses of a warm loop may be none: their count is not asserted. A
// PMU that does not count LLC misses (QEMU's, in the arm64 VM:
// TestPMUInVM) refuses them with ErrEventNotSupported, naming the event.
// Elsewhere it skips through privtest.PMU, and TestHardwareEventsRefused
// checks the refusal.
func TestHardwareEvents(t *testing.T) {
	privtest.Root(t)
	privtest.PMU(t)
	for _, ev := range []perfevent.Event{perfevent.Instructions, perfevent.LLCMisses} {
		r, err := runHotOn(SamplerConfig{Event: ev, Hz: 99}, 2*time.Second)
		var pe *perfevent.OpenError
		if ev == perfevent.LLCMisses && errors.Is(err, perfevent.ErrEventNotSupported) && errors.As(err, &pe) && pe.Event == ev {
			t.Logf("%v: %v", ev, err)
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", ev, err)
		}
		if r.p.SampleType[1].Type != ev.String() {
			t.Errorf("%v: sample types %v", ev, r.p.SampleType)
		}
		if ev != perfevent.Instructions {
			continue
		}
		var in, all int64
		for _, s := range r.p.Sample {
			all += s.Value[0]
			if ids := s.Label[LabelProgID]; len(ids) == 1 && ids[0] == strconv.Itoa(int(r.id)) {
				in += s.Value[0]
			}
		}
		if all == 0 || in*2 < all {
			t.Errorf("instructions: %d of %d samples in the spinning program, want most", in, all)
		}
	}
}
