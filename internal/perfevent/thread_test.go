package perfevent

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// groupRead lays out a group read as the kernel writes it with
// PERF_FORMAT_GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING|ID (struct
// read_format in perf_event_open(2)): nr, time_enabled, time_running, then
// {value, id} per event, leader first, u64s in the host's byte order.
func groupRead(enabled, running uint64, valueIDs ...uint64) []byte {
	words := append([]uint64{uint64(len(valueIDs) / 2), enabled, running}, valueIDs...)
	buf := make([]byte, 0, 8*len(words))
	for _, w := range words {
		buf = binary.NativeEndian.AppendUint64(buf, w)
	}
	return buf
}

// A group's two reads, parsed and scaled by enabled/running when it was
// multiplexed, like perf stat, with its share of time on the PMU.
//
// These readings are constructed, for the edges (never on the PMU, bad
// reads): they follow the kernel's documented layout, and the figures are
// shaped like a cycles, instructions, LLC-misses group around a
// 2,000-turn loop run 1,000 times (about 8M instructions).
// TestGroupReadRecorded checks real multiplexed reads of a PMU driver,
// recorded in the arm64 VM, and TestThreadCounters reads the same layout
// from the kernel for real, with cpu-clock.
func TestGroupReadScaled(t *testing.T) {
	ids := []uint64{41, 42, 43} // cycles, instructions, llc-misses
	start := groupRead(1_000_000, 1_000_000, 5_000, 41, 7_000, 42, 30, 43)
	for _, c := range []struct {
		name       string
		start, end []byte
		want       []float64
		share      float64
		err        bool
	}{
		{"on the PMU the whole window",
			start, groupRead(5_000_000, 5_000_000, 12_005_000, 41, 8_007_000, 42, 1_030, 43),
			[]float64{12_000_000, 8_000_000, 1_000}, 1, false},
		{"multiplexed: on the PMU a quarter of the window (time_enabled > time_running)",
			start, groupRead(5_000_000, 2_000_000, 3_005_000, 41, 2_007_000, 42, 280, 43),
			[]float64{12_000_000, 8_000_000, 1_000}, 0.25, false},
		{"multiplexed: 40% of the window",
			groupRead(10_000_000, 6_000_000, 100, 41, 200, 42, 0, 43), groupRead(20_000_000, 10_000_000, 4_000_100, 41, 3_000_200, 42, 400, 43),
			[]float64{10_000_000, 7_500_000, 1_000}, 0.4, false},
		{"never on the PMU: counts 0, share 0",
			start, groupRead(5_000_000, 1_000_000, 5_000, 41, 7_000, 42, 30, 43),
			[]float64{0, 0, 0}, 0, false},
		{"events out of order", start, groupRead(2, 2, 1, 42, 1, 41, 1, 43), nil, 0, true},
		{"a group of 2 read as 3", start, groupRead(2, 2, 1, 41, 1, 42), nil, 0, true},
		{"a short read", start, groupRead(2, 2, 1, 41, 1, 42, 1, 43)[:40], nil, 0, true},
	} {
		a, err := parseGroupRead(c.start, ids)
		if err != nil {
			t.Fatalf("%s: start: %v", c.name, err)
		}
		b, err := parseGroupRead(c.end, ids)
		if c.err {
			if err == nil {
				t.Errorf("%s: parsed as %+v, want an error", c.name, b)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got, share, err := groupDelta(a, b, len(ids))
		if err != nil || share != c.share || !slices.Equal(got, c.want) {
			t.Errorf("%s: counts %v share %v (%v), want %v share %v", c.name, got, share, err, c.want, c.share)
		}
	}
	if _, _, err := groupDelta(groupReading{Values: []uint64{1, 2, 3}}, groupReading{Values: []uint64{1, 2, 3}}, 2); err == nil {
		t.Error("a group of 3 read as 2: want an error")
	}
}

// Recorded group reads from a real PMU driver under multiplexing
// (TestGroupReadMultiplexed, in the arm64 VM under icount): each group
// on the PMU part of the time, each scaled figure within 5% of a pinned
// event's count of the same work. The reads are the kernel's bytes, in
// its (little-endian) byte order.
func TestGroupReadRecorded(t *testing.T) {
	if !littleEndian() {
		t.Skip("the recorded reads are little-endian; parseGroupRead reads the host's order")
	}
	b, err := os.ReadFile("testdata/groupread-qemu-arm64.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx groupReadFixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded: %s", fx.Recorded)
	if len(fx.Groups) != groupsPerWindow {
		t.Fatalf("%d groups recorded, want %d", len(fx.Groups), groupsPerWindow)
	}
	checkGroupFixture(t, fx, nil)
}

func littleEndian() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// ThreadCounters count the calling thread only, around a test run: its
// cpu-clock per run matches the kernel's own mean duration of the runs
// (BPF_PROG_TEST_RUN's, which covers its loop), and a thread waiting
// counts nothing while another one spins. cpu-clock stands in for the
// hardware events, which go through the same group, enable, read and
// scaling.
func TestThreadCounters(t *testing.T) {
	privtest.Root(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenThreadCounters([]Event{CPUClock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prog, err := privtest.LoadLoop("perfevent_tc", 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	const repeat = 2000
	var ratios []float64
	for range 5 {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		_, perRun, err := prog.Benchmark(make([]byte, 14), repeat, nil)
		counts, share, serr := c.Stop()
		if err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		if share != 1 {
			t.Errorf("cpu-clock multiplexed: share %v", share)
		}
		ratios = append(ratios, counts[0]/repeat/float64(perRun.Nanoseconds()))
	}
	slices.Sort(ratios)
	t.Logf("cpu-clock counted per run / the kernel's mean per run: %.3f", ratios)
	if m := ratios[2]; m < 0.95 || m > 1.15 {
		t.Errorf("counted cpu-clock per run is %.3f of the kernel's duration, want 0.95..1.15", m)
	}

	busy := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
		}
		close(busy)
	}()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	<-busy
	counts, _, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] > float64(10*time.Millisecond) {
		t.Errorf("a waiting thread counted %.1f ms of cpu-clock while another spun 60 ms", counts[0]/1e6)
	}
}

// Where there is no PMU, opening hardware events on a thread fails with
// the clear refusal: ErrNoPMU, ENOENT, "no hardware PMU (ENOENT)".
func TestThreadCountersNoPMU(t *testing.T) {
	privtest.Root(t)
	if privtest.NoPMU(t) == "" {
		t.Skip("this machine has a PMU: TestThreadCountersHardware counts")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenThreadCounters([]Event{Cycles, Instructions, LLCMisses})
	var oe *OpenError
	if err == nil {
		c.Close()
		t.Fatal("hardware events opened where the probe found no PMU")
	}
	if !errors.As(err, &oe) || !errors.Is(err, ErrNoPMU) || oe.Event != Cycles || oe.Summary() != "no hardware PMU (ENOENT)" {
		t.Errorf("refusal: %v, want an *OpenError for cycles saying no hardware PMU (ENOENT)", err)
	}
}

// Where a PMU exists, a thread's hardware group around test runs of a
// 2,000-turn loop counts what the loop's JIT image says it executes:
// instructions per run within 10% of body × turns + the rest of the image
// (measured on a PMU host: 8,009 in the image, perf stat 8,103 with the
// test-run harness), cycles between instructions/8 and instructions×8,
// LLC misses > 0 and at most the instructions. Never run: none of our hosts
// has a PMU.
func TestThreadCountersHardware(t *testing.T) {
	privtest.Root(t)
	privtest.PMU(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenThreadCounters([]Event{Cycles, Instructions, LLCMisses})
	var oe *OpenError
	if errors.As(err, &oe) && oe.Event == LLCMisses && errors.Is(err, ErrEventNotSupported) {
		// QEMU's arm64 PMU (TestPMUInVM) has no cache events.
		t.Logf("%v; counting cycles and instructions", err)
		c, err = OpenThreadCounters([]Event{Cycles, Instructions})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const turns, repeat = 2000, 1000
	prog, path := loopWithPath(t, "perfevent_hw", turns)
	want := float64(path)
	// Runs in one test-run call, so the system call's own instructions
	// spread over a thousand.
	var counts []float64
	var share float64
	for range 3 { // the warmest of three: the first may fault in pages
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		_, _, err := prog.Benchmark(make([]byte, 14), repeat, nil)
		got, sh, serr := c.Stop()
		if err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		if counts == nil || got[1] < counts[1] {
			counts, share = got, sh
		}
	}
	cycles, insns := counts[0]/repeat, counts[1]/repeat
	misses := math.NaN()
	if len(counts) > 2 {
		misses = counts[2]
	}
	t.Logf("per run: %.0f cycles, %.0f instructions (JIT path %d turns: %.0f); %.0f LLC misses in all; on the PMU %.0f%%",
		cycles, insns, turns, want, misses, 100*share)
	if share <= 0 {
		t.Fatalf("the group never ran on the PMU: %v", counts)
	}
	for i, n := range counts {
		if n <= 0 {
			t.Errorf("%v counted %.0f, want more than 0", c.Events()[i], n)
		}
	}
	if insns < 0.9*want || insns > 1.1*want {
		t.Errorf("instructions per run %.0f, want within 10%% of the JIT image's %.0f", insns, want)
	}
	if cycles < insns/8 || cycles > insns*8 {
		t.Errorf("cycles per run %.0f for %.0f instructions: IPC outside 1/8..8", cycles, insns)
	}
	if misses > counts[1] {
		t.Errorf("%.0f LLC misses for %.0f instructions", misses, counts[1])
	}
	// Under icount the cycle counter is the clock icount drives.
	if shift, exact := vmtest.ICount(); exact && math.Abs(cycles/(insns*float64(uint64(1)<<shift))-1) > 0.01 {
		t.Errorf("cycles per run %.0f for %.0f instructions, want instructions << %d within 1%%", cycles, insns, shift)
	}
}

// loopWithPath loads a loop of turns turns (privtest.LoadLoop), closed
// when the test ends, and returns it with the instructions one run
// executes in its JIT image.
func loopWithPath(t *testing.T, name string, turns int) (*ebpf.Program, int) {
	t.Helper()
	prog, err := privtest.LoadLoop(name, int32(turns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	path, err := privtest.JitedPath(prog, turns)
	if err != nil {
		t.Fatal(err)
	}
	return prog, path
}

// TestPMUInVM runs the tests that need a PMU in the arm64 VM under icount
// (QEMU's emulated PMUv3, exact instruction counts).
func TestPMUInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{Arch: vmtest.ARM64, Exact: true}, []string{"TestThreadCountersHardware", "TestGroupReadMultiplexed"})
}

// groupReadFixture is a recording of real multiplexed group reads
// (TestGroupReadMultiplexed logs one; testdata/groupread-*.json keep
// them): each group's two reads as the kernel wrote them, the ids it
// gave the group's events, and what a pinned event counted over the same
// work, which every scaled figure estimates.
type groupReadFixture struct {
	Recorded  string              `json:"recorded"`
	Reference uint64              `json:"reference"`
	Groups    []groupReadRecorded `json:"groups"`
}

type groupReadRecorded struct {
	IDs   []uint64 `json:"ids"`
	Start string   `json:"start"` // hex of the raw read, before the work
	End   string   `json:"end"`   // and after it
}

// scaledGroup parses a recorded group's two reads and scales them as
// ThreadCounters.Stop does.
func scaledGroup(g groupReadRecorded) (counts []float64, share float64, enabled, running uint64, err error) {
	raw := make([][]byte, 2)
	for i, h := range []string{g.Start, g.End} {
		if raw[i], err = hex.DecodeString(h); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	a, err := parseGroupRead(raw[0], g.IDs)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	b, err := parseGroupRead(raw[1], g.IDs)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	counts, share, err = groupDelta(a, b, len(g.IDs))
	return counts, share, b.Enabled - a.Enabled, b.Running - a.Running, err
}

// groupsPerWindow, eventsPerGroup: 8 instruction events in 4 groups, with
// a pinned one beside them, on a PMU of 6 counters (QEMU's PMUv3; the
// cycle counter counts cycles only): 5 left for 8, so at most 2 groups
// are on the PMU at a time and each is multiplexed.
const groupsPerWindow, eventsPerGroup = 4, 2

// TestGroupReadMultiplexed reads real groups multiplexed on a real PMU
// driver: in the arm64 VM under icount (TestPMUInVM), where QEMU's
// PMUv3 counts instructions retired exactly, 8 instruction events in 4
// groups on the calling thread share 5 counters around test runs of a
// loop, beside a pinned instructions event that stays on the PMU all
// along (the oracle: one un-multiplexed count of the same work). Each
// group ran less than it was enabled (time_running < time_enabled), and
// each scaled figure is within 5% of the pinned count. It logs the raw
// reads as a fixture (testdata/groupread-qemu-arm64.json keeps one, which
// TestGroupReadScaled checks on hosts without a PMU).
func TestGroupReadMultiplexed(t *testing.T) {
	if _, exact := vmtest.ICount(); !exact {
		t.Skip("needs exact instruction counts: runs in the arm64 VM under icount (TestPMUInVM)")
	}
	privtest.Root(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr, err := Instructions.CountingAttr()
	if err != nil {
		t.Fatal(err)
	}
	attr.Options.ExcludeUser, attr.Options.ExcludeHypervisor = true, true
	attr.Options.Pinned, attr.Options.Disabled = true, true
	attr.CountFormat = perf.CountFormat{Enabled: true, Running: true}
	ref, err := perf.Open(attr, perf.CallingThread, perf.AnyCPU, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var groups []*ThreadCounters
	for range groupsPerWindow {
		c, err := OpenThreadCounters(slices.Repeat([]Event{Instructions}, eventsPerGroup))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		groups = append(groups, c)
	}
	const turns, repeat, calls = 2000, 2000, 10
	prog, path := loopWithPath(t, "perfevent_mux", turns)

	work := func(calls int) {
		for range calls {
			if _, _, err := prog.Benchmark(make([]byte, 14), repeat, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A first stretch of work the groups count and the reference does
	// not, so that the recorded reads start where counts and times are
	// already under way, as a second window's would.
	for _, c := range groups {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	work(2)
	for _, c := range groups {
		if _, _, err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	starts := make([][]byte, len(groups))
	if err := ref.Enable(); err != nil {
		t.Fatal(err)
	}
	for i, c := range groups {
		if starts[i], err = rawGroupRead(c); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	work(calls)
	stopped := make([][]float64, len(groups))
	for i, c := range groups {
		if stopped[i], _, err = c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ref.Disable(); err != nil {
		t.Fatal(err)
	}
	rc, err := ref.ReadCount()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pinned instructions: %d (enabled %v, running %v); JIT path %d x %d runs = %d",
		rc.Value, rc.Enabled, rc.Running, path, repeat*calls, path*repeat*calls)
	if rc.Running != rc.Enabled || rc.Value == 0 {
		t.Fatalf("the pinned event was not on the PMU all along: %+v", rc)
	}
	// The reference itself against the image: the runs' path and a little
	// more (the test-run loop and the system calls around it).
	if want := float64(path * repeat * calls); math.Abs(float64(rc.Value)/want-1) > 0.03 {
		t.Errorf("pinned instructions %d, want within 3%% of the JIT path's %.0f", rc.Value, want)
	}
	fx := groupReadFixture{
		Recorded:  "QEMU arm64 PMUv3, " + kernelRelease() + ", -icount shift=1: 4 groups of 2 kernel-mode instruction events and a pinned one on one thread, 20,000 runs of a 2,000-turn loop after 4,000 counted before",
		Reference: rc.Value,
	}
	for i, c := range groups {
		end, err := rawGroupRead(c)
		if err != nil {
			t.Fatal(err)
		}
		fx.Groups = append(fx.Groups, groupReadRecorded{IDs: c.ids, Start: hex.EncodeToString(starts[i]), End: hex.EncodeToString(end)})
	}
	checkGroupFixture(t, fx, stopped)
	js, err := json.Marshal(fx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture: %s", js)
}

// checkGroupFixture checks recorded group reads: each group multiplexed
// (on the PMU part of the time, not none of it), each scaled figure
// within 5% of the reference. stopped, if set, is what ThreadCounters.Stop
// returned for the same reads, which parsing them must give again.
func checkGroupFixture(t *testing.T, fx groupReadFixture, stopped [][]float64) {
	t.Helper()
	if len(fx.Groups) == 0 || fx.Reference == 0 {
		t.Fatalf("fixture %+v: no groups or no reference", fx)
	}
	for i, g := range fx.Groups {
		counts, share, enabled, running, err := scaledGroup(g)
		if err != nil {
			t.Fatalf("group %d: %v", i, err)
		}
		t.Logf("group %d: enabled %d ns, running %d ns (%.1f%% on the PMU); scaled %.0f against the pinned %d (%+.2f%%)",
			i, enabled, running, 100*share, counts, fx.Reference, 100*(counts[0]/float64(fx.Reference)-1))
		if running == 0 || running >= enabled || share <= 0 || share >= 1 {
			t.Errorf("group %d: running %d of %d ns enabled: want multiplexed, on the PMU part of the time", i, running, enabled)
		}
		for j, n := range counts {
			if math.Abs(n/float64(fx.Reference)-1) > 0.05 {
				t.Errorf("group %d event %d: scaled %.0f, want within 5%% of the pinned count %d", i, j, n, fx.Reference)
			}
		}
		if stopped != nil && !slices.Equal(stopped[i], counts) {
			t.Errorf("group %d: Stop gave %v, the raw reads parse to %v", i, stopped[i], counts)
		}
	}
}

// rawGroupRead is one read(2) of a group through its leader, as the
// kernel wrote it.
func rawGroupRead(c *ThreadCounters) ([]byte, error) {
	fd, err := c.leader.FD()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, groupReadSize(len(c.ids)))
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "kernel ?"
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}
