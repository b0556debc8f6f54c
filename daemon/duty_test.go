package daemon_test

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// steadyLoad runs prog 100 times every millisecond, on a ticker, until
// stop, and counts the runs it made. Paced by the clock, as packets or
// syscalls arrive, its rate does not depend on what a run costs: a load
// that ran flat out would run slower while stats are on, and a rate
// sampled then would read low.
type steadyLoad struct {
	runs atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startLoad(t testing.TB, prog *ebpf.Program) *steadyLoad {
	l := &steadyLoad{stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: 100}); err != nil {
				t.Error(err)
				return
			}
			l.runs.Add(100)
		}
	}()
	t.Cleanup(l.end)
	return l
}

func (l *steadyLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// measuredRate is the load's runs/s over d, by its own count.
func (l *steadyLoad) rate(d time.Duration) float64 {
	n0, t0 := l.runs.Load(), time.Now()
	time.Sleep(d)
	return float64(l.runs.Load()-n0) / time.Since(t0).Seconds()
}

// historyRate is runs/s between the first and last history points of
// the last d.
func historyRate(t testing.TB, d *daemonProc, name string, since time.Duration) (float64, []api.HistoryPoint) {
	var pts []api.HistoryPoint
	if err := d.query(&pts, "history", name, "--since", since.String()); err != nil {
		t.Fatal(err)
	}
	if len(pts) < 3 {
		t.Fatalf("history has %d points over %v", len(pts), since)
	}
	first, last := pts[0], pts[len(pts)-1]
	return float64(last.RunCnt-first.RunCnt) / last.Time.Sub(first.Time).Seconds(), pts
}

// dutyLoopTurns makes TestStatsDuty's program take about 65 ns a run
// here, several times what the clock reads around it cost: 100 runs a
// millisecond stay under 1% of a CPU.
const dutyLoopTurns = 200

// historyNsPerRun is run time over runs between the first and last of
// pts: the ns/run the daemon's scaled counters give over that span.
func historyNsPerRun(t testing.TB, pts []api.HistoryPoint) float64 {
	t.Helper()
	first, last := pts[0], pts[len(pts)-1]
	if last.RunCnt <= first.RunCnt {
		t.Fatalf("no runs in history between %v and %v", first.Time, last.Time)
	}
	return float64(last.RunTimeNs-first.RunTimeNs) / float64(last.RunCnt-first.RunCnt)
}

// statsRecord reads a program's kernel counters every 50 ms.
type statsRecord struct {
	prog  *ebpf.Program
	done  chan struct{}
	wg    sync.WaitGroup
	reads []statsRead
}

type statsRead struct {
	at          time.Time
	runs, runNs uint64
}

func recordStats(prog *ebpf.Program) *statsRecord {
	r := &statsRecord{prog: prog, done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, err := prog.Stats(); err == nil {
				r.reads = append(r.reads, statsRead{time.Now(), st.RunCount, uint64(st.Runtime)})
			}
			select {
			case <-r.done:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

func (r *statsRecord) stop() *statsRecord {
	close(r.done)
	r.wg.Wait()
	return r
}

// nsPerRunOver is the kernel's ns/run between the first and last history
// points of pts it can place, and those points. At a duty cycle the
// kernel's counters move only in the on part before each tick and until
// stats close after it, so a read taken in the off part after a point
// (from 300 ms after it to 300 ms before the next on part; offPart is the
// interval less the on part) holds what the daemon read at that tick,
// bar the runs of the moments it took to close stats. A window of the
// same length but other edges held one on part more or less than the
// daemon's: -6.2% once in CI, on a host whose speed moves from one on
// part to the next.
func (r *statsRecord) nsPerRunOver(t *testing.T, pts []api.HistoryPoint, onPart time.Duration) (float64, []api.HistoryPoint) {
	t.Helper()
	at := func(p api.HistoryPoint, interval time.Duration) (statsRead, bool) {
		for _, rd := range r.reads {
			if d := rd.at.Sub(p.Time); d >= 300*time.Millisecond && d <= interval-onPart-300*time.Millisecond {
				return rd, true
			}
		}
		return statsRead{}, false
	}
	interval := pts[1].Time.Sub(pts[0].Time).Round(100 * time.Millisecond)
	first, last := -1, -1
	var r0, r1 statsRead
	for i, p := range pts {
		if rd, ok := at(p, interval); ok {
			if first < 0 {
				first, r0 = i, rd
			}
			last, r1 = i, rd
		}
	}
	if first < 0 || last-first < 2 || r1.runs <= r0.runs {
		t.Fatalf("the kernel's counters were read in the off parts after %d of %d points, want 3 or more with runs between", max(0, last-first+1), len(pts))
	}
	return float64(r1.runNs-r0.runNs) / float64(r1.runs-r0.runs), pts[first : last+1]
}

// TestStatsDuty runs bpfperfd with stats on 20% of each interval under a
// steady load of a program with a fixed cost per run: the kernel counts
// 20% of the runs made, ±30% (stats are on for the duty set, not half or
// all of it), the daemon's runs/s matches the load's own count, and its
// ns/run over its last intervals is within 5% of the kernel's own over
// the same on parts (run counts and run time scaled alike; the kernel
// counted the runs made while stats were on). That oracle is of the same moment:
// this host's speed moves by up to 20% within a minute (the kernel's
// full-time figure read 117.8, 103.2, 97.0 ns), so the figure with stats
// on all the time, taken seconds after, is logged beside it, not
// asserted (CI read +18% against it once, with the daemon right).
// History marks the points as estimates and status shows the duty. With
// another stats fd held (as bpftop holds one) the daemon sees that stats
// stay on, suspends the cycle and does not scale: the rate is still
// right, not five times too high.
func TestStatsDuty(t *testing.T) {
	privtest.Root(t)
	name := uniqueName("duty")
	// A loop, so that a run costs the same every time and far more than
	// the clock reads around it.
	prog, err := privtest.LoadLoop(name, dutyLoopTurns)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	state := t.TempDir()
	// 20% of a 2 s interval: an on part of 400 ms in every interval.
	// Turning stats on or off takes 4-18 ms here, and when in it the
	// kernel starts or stops counting is known only to within it
	// (collectors.Stats.Pause), so a 100 ms on part's rates are uncertain
	// by several percent (CI read -5.3%, this host -9% to +9% as the close
	// was counted to its return, its start or its middle), and the daemon
	// gathers parts shorter than 10 switches into one every few intervals
	// (TestStatsDutyFloor): 400 ms is a part of its own up to 40 ms a
	// switch. (At 10%, 200 ms, it was gathered two intervals in one once
	// a switch took 12.7 ms, then 20 switches, and the checks below of
	// each interval's counters read 6% off.)
	d := startDaemon(t, state, "--interval", "2s", "--stats.duty", "20%", "--profile.every", "0")
	load := startLoad(t, prog)
	defer load.end() // before the program closes
	var st api.Status
	eventually(t, "status to say the duty cycle runs", func() bool {
		return d.query(&st, "status") == nil && strings.HasPrefix(st.StatsDuty, "20%") && !strings.Contains(st.StatsDuty, "suspended")
	})
	time.Sleep(4 * time.Second)

	// Stats go off: the kernel counted far fewer runs than were made.
	rec := recordStats(prog)
	info0, _ := prog.Stats()
	made0 := load.runs.Load()
	want := load.rate(10 * time.Second)
	info1, _ := prog.Stats()
	made1 := load.runs.Load()
	counted := float64(info1.RunCount-info0.RunCount) / float64(made1-made0)
	t.Logf("the kernel counted %.1f%% of the runs made", counted*100)
	if counted < 0.14 || counted > 0.26 {
		t.Errorf("the kernel counted %.1f%% of the runs with stats on 20%% of the time, want 14-26%%", counted*100)
	}
	got, pts := historyRate(t, d, name, 10*time.Second)
	// The kernel's counters stand still between a tick and the next on
	// part: read there, they are what the daemon read at the tick.
	time.Sleep(time.Second)
	kernelNs, span := rec.stop().nsPerRunOver(t, pts, 2*time.Second/5)
	dutyNs := historyNsPerRun(t, span)
	t.Logf("duty 20%%: daemon %.0f runs/s, load's own count %.0f runs/s", got, want)
	if math.Abs(got/want-1) > 0.05 {
		t.Errorf("runs/s at 20%% duty: daemon %.0f, load %.0f (off by %.0f%%)", got, want, (got/want-1)*100)
	}
	last := pts[len(pts)-1]
	if !last.Estimated {
		t.Errorf("history point %v not marked estimated", last.Time)
	}
	if last.AvgNsPerRun == nil || *last.AvgNsPerRun <= 0 {
		t.Errorf("no ns/run at 20%% duty: %+v", last)
	}
	d.json(t, &st, "status")
	if st.StatsDuty == "" || !strings.HasPrefix(st.StatsDuty, "20%") {
		t.Errorf("status stats_duty = %q", st.StatsDuty)
	}

	// Another holder keeps stats on: no scaling, the rate still right.
	fd, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	eventually(t, "status to say the duty cycle is suspended", func() bool {
		return d.query(&st, "status") == nil && strings.Contains(st.StatsDuty, "suspended")
	})
	time.Sleep(4 * time.Second) // a tick under the old scale passes
	full0, _ := prog.Stats()
	want = load.rate(6 * time.Second)
	full1, _ := prog.Stats()
	fullAfter := float64(full1.Runtime-full0.Runtime) / float64(full1.RunCount-full0.RunCount)
	got, _ = historyRate(t, d, name, 6*time.Second)
	t.Logf("another stats fd held: daemon %.0f runs/s, load %.0f runs/s", got, want)
	if math.Abs(got/want-1) > 0.05 {
		t.Errorf("runs/s with stats held elsewhere: daemon %.0f, load %.0f (off by %.0f%%)", got, want, (got/want-1)*100)
	}
	t.Logf("ns/run: daemon at 20%% duty %.1f over %d intervals, the kernel over the same on parts %.1f (%+.1f%%); the kernel with stats on all the time %.1f seconds later",
		dutyNs, len(span)-1, kernelNs, (dutyNs/kernelNs-1)*100, fullAfter)
	if math.Abs(dutyNs/kernelNs-1) > 0.05 {
		t.Errorf("ns/run at 20%% duty: daemon %.1f, the kernel over the same on parts %.1f (off by %.1f%%)", dutyNs, kernelNs, (dutyNs/kernelNs-1)*100)
	}
	fd.Close()

	// Restarted at 100%: what the 20% run stored stays marked, what the
	// new run stores is not.
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	d = startDaemon(t, state, "--interval", "1s", "--stats.duty", "100%", "--profile.every", "0")
	time.Sleep(3 * time.Second)
	d.json(t, &pts, "history", name, "--since", "30s")
	var before, after int
	for _, p := range pts {
		switch {
		case p.Time.Before(restart) && p.Estimated:
			before++
		case p.Time.After(restart) && !p.Estimated:
			after++
		default:
			t.Errorf("point at %v (restart at %v): estimated %v", p.Time, restart, p.Estimated)
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("%d estimated points before the restart, %d plain after; want some of each", before, after)
	}
}

// TestStatsDutyHolderInOffPart: another holder (bpftop, an admin's
// sysctl) turns stats on for 120 ms at a time, at varying moments of the
// daemon's 10% duty cycle, so mostly while the daemon's own fd is closed.
// The kernel counts those runs too; scaled by the daemon's on time alone,
// such an interval read up to 1/share times too high (3.96x measured,
// issue 45). The daemon notices stats counting during its off part (a
// probe run every few tens of ms), reopens its fd and credits the time
// since it last saw them off: its runs/s never read high (at most 5% over
// the load's own count, whose rate is steady) and stay a close lower
// bound; status says how many off parts a holder cut short.
func TestStatsDutyHolderInOffPart(t *testing.T) {
	privtest.Root(t)
	name := uniqueName("dutyblip")
	prog, err := privtest.LoadLoop(name, dutyLoopTurns)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	d := startDaemon(t, t.TempDir(), "--interval", "1s", "--stats.duty", "10%", "--profile.every", "0")
	load := startLoad(t, prog)
	defer load.end()
	var st api.Status
	eventually(t, "status to say the duty cycle runs", func() bool {
		return d.query(&st, "status") == nil && strings.HasPrefix(st.StatsDuty, "10%") && !strings.Contains(st.StatsDuty, "suspended")
	})
	time.Sleep(2 * time.Second)

	stop := make(chan struct{})
	blips := make(chan int)
	go func() {
		n := 0
		defer func() { blips <- n }()
		for i := 0; ; i++ {
			// 1.0 to 1.4 s apart: the blips walk through the cycle.
			select {
			case <-stop:
				return
			case <-time.After(time.Second + time.Duration(i%5)*100*time.Millisecond):
			}
			fd, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(120 * time.Millisecond)
			fd.Close()
			n++
		}
	}()
	want := load.rate(12 * time.Second)
	got, _ := historyRate(t, d, name, 10*time.Second)
	close(stop)
	n := <-blips
	d.json(t, &st, "status")
	t.Logf("%d blips of another holder; daemon %.0f runs/s, load's own count %.0f (%+.1f%%); status: %s", n, got, want, (got/want-1)*100, st.StatsDuty)
	if got > want*1.05 {
		t.Errorf("runs/s with another holder turning stats on in the off parts: daemon %.0f, load %.0f: read high by %.0f%%", got, want, (got/want-1)*100)
	}
	if got < want*0.7 {
		t.Errorf("runs/s: daemon %.0f, load %.0f: %.0f%% low, want a close lower bound", got, want, (1-got/want)*100)
	}
	if !strings.Contains(st.StatsDuty, "another holder turned stats on during") {
		t.Errorf("status does not say a holder cut off parts short: %q", st.StatsDuty)
	}
}

// TestStatsDutyFloor runs bpfperfd at the budget's floor, stats on 1% of
// the time at a 1 s interval: 10 ms a second. On the Intel and AMD hosts
// of 2026-11-27 that was about what turning stats on or off takes (4-15
// ms), so each part's runs were a guess: 10 ms parts in every interval
// read the load 36% and 77% high (two runs). There the daemon gathers the
// parts into one of at least 10 switches every 10 or so intervals and
// carries its rates through the intervals between; on a host whose switch
// takes under a millisecond (the AMD EPYC one of 2026-11-28), 10 ms parts
// in every interval are 10 switches already, and nothing is gathered.
// Either way, over 20 s its runs/s are within 10% of a steady load's own
// count (-2.6% to +3.3% in five runs gathered: the load's own rate over a
// 230 ms part wanders by a few percent, and the switch blurs each end by
// a few ms), no interval between on parts reads zero, every point is
// marked estimated, and the points the parts did not read, and only
// those, are marked carried.
func TestStatsDutyFloor(t *testing.T) {
	privtest.Root(t)
	name := uniqueName("dutyfloor")
	prog, err := privtest.LoadLoop(name, dutyLoopTurns)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	// The load first: the first interval holds the first on part, whose
	// rates the next 20 or so carry.
	load := startLoad(t, prog)
	defer load.end()
	d := startDaemon(t, t.TempDir(), "--interval", "1s", "--stats.duty", "1%", "--profile.every", "0")
	var st api.Status
	eventually(t, "status to say the 1% share", func() bool {
		return d.query(&st, "status") == nil && strings.HasPrefix(st.StatsDuty, "1%: stats on")
	})
	time.Sleep(2 * time.Second)
	want := load.rate(20 * time.Second)
	got, pts := historyRate(t, d, name, 20*time.Second)
	if err := d.query(&st, "status"); err != nil {
		t.Fatal(err)
	}
	// What the switch took decides (plan): gathered, status says "one 1s
	// interval in N"; else "10ms of each 1s (the switch takes 240µs)".
	gathered := strings.Contains(st.StatsDuty, "interval in")
	t.Logf("1%%: daemon %.0f runs/s, load's own count %.0f (%+.1f%%) over %d points; status: %s", got, want, (got/want-1)*100, len(pts), st.StatsDuty)
	if math.Abs(got/want-1) > 0.10 {
		t.Errorf("runs/s at 1%%: daemon %.0f, load %.0f (off by %+.1f%%)", got, want, (got/want-1)*100)
	}
	read := 0
	for i := 1; i < len(pts); i++ {
		if pts[i].RunCnt <= pts[i-1].RunCnt {
			t.Errorf("no runs between %v and %v: an interval between on parts read as idle", pts[i-1].Time, pts[i].Time)
		}
		if !pts[i].Estimated {
			t.Errorf("point at %v not marked estimated", pts[i].Time)
		}
		if !pts[i].Carried {
			read++
		}
	}
	// Gathered, one interval in ten or so has its part: the others are
	// marked carried, and check leaves them out
	// (TestCheckLeavesOutCarriedIntervals). Else every interval is read.
	// (The switch's time is the longest of its last eight: one slow switch
	// can gather a few parts of a host that mostly does not.)
	switch {
	case gathered && (read < 1 || read > len(pts)/2):
		t.Errorf("%d of %d intervals not carried, want the one in ten or so that held an on part", read, len(pts)-1)
	case !gathered && read < len(pts)/2:
		t.Errorf("%d of %d intervals not carried, parts not gathered: want every interval read", read, len(pts)-1)
	}
}
