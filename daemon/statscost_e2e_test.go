package daemon_test

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestStatsCostStatus: status reports bpf_stats' cost per run and the
// host-wide CPU it costs (runs/s x cost); where stats were already on at
// start (here: held by this test) it says it could not measure, and why.
// Its figures are checked against oracles outside the daemon: the cost
// per run against the same cost timed by the wall clock
// (privtest.StatsCostByWallClock), runs/s against the kernel's run counts
// of every program read by bpftool, under a steady load of ~90,000 runs/s.
func TestStatsCostStatus(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	privtest.LockStats(t)
	wallOff, wallOn := wallClockStatsCost(t)
	wallCost := wallOn - wallOff
	held, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir())
	held.Close()
	var st api.Status
	d.json(t, &st, "status")
	if sc := st.StatsCost; sc == nil || sc.Measured || !strings.Contains(sc.Detail, "already on") {
		t.Errorf("stats held on at start: stats_cost %+v, want not measured, saying stats were already on", sc)
	}
	d.stop(t, unix.SIGTERM)

	// Started while other processes keep both CPUs busy, the daemon's
	// figure still matches the wall clock's: measured on a quiet host, or
	// under the same load. Where the vCPUs share a core that load makes
	// every run slower, stats' part too (CI run 18, 2026-11-28: 81.0 ns
	// busy, its own wall clock 84.4, where the quiet wall clock said
	// 67.5), so the busy host's figure is the oracle there. The fault
	// this is for read a busy start 44% high by both.
	hogs := busyCPUs(t, runtime.NumCPU())
	busyOff, busyOn := privtest.StatsCostByWallClock(t, 41, 20000)
	busyCost := busyOn - busyOff
	d = startDaemon(t, t.TempDir(), "--interval", "1s", "--profile.every", "0")
	d.json(t, &st, "status")
	hogs.stop()
	if sc := st.StatsCost; sc == nil {
		t.Fatal("no stats_cost in status")
	} else if !sc.Measured {
		// LockStats keeps the suite's own holders out: someone else.
		privtest.Skip(t, "stats cost not measured, BPF run-time stats held on outside the test suite: "+sc.Detail)
	}
	prog, err := privtest.LoadLoop(uniqueName("cost"), dutyLoopTurns)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	load := startLoad(t, prog)
	defer load.end()
	time.Sleep(2500 * time.Millisecond) // two sweeps with the load running
	// The kernel's runs/s, every program's, around the daemon's last sweep.
	n0, t0 := hostRunCount(t), time.Now()
	time.Sleep(1500 * time.Millisecond)
	d.json(t, &st, "status")
	n1, t1 := hostRunCount(t), time.Now()
	kernelRate := float64(n1-n0) / t1.Sub(t0).Seconds()
	sc := st.StatsCost
	t.Logf("stats cost: %.1f ns/run (wall clock %.1f quiet, %.1f busy: %.1f off, %.1f on); runs/s %.0f (kernel via bpftool %.0f); cpu %v%%",
		sc.NsPerRun, wallCost, busyCost, busyOff, busyOn, sc.RunsPerSec, kernelRate, fmtPtr(sc.CPUPercent))
	t.Logf("measured while %d processes kept the CPUs busy: %s", runtime.NumCPU(), sc.Detail)
	near := func(ref float64) bool { return math.Abs(sc.NsPerRun-ref) <= 0.15*ref+1 }
	if !near(wallCost) && !near(busyCost) {
		t.Errorf("stats cost %.1f ns/run, the wall clock says %.1f quiet (%.1f off, %.1f on) and %.1f under the same load", sc.NsPerRun, wallCost, wallOff, wallOn, busyCost)
	}
	if !sc.Settled || sc.Pairs == 0 || len(sc.SpreadNs) != 2 || math.Abs(sc.WallClockNsPerRun-sc.NsPerRun) > 0.15*sc.NsPerRun+1 {
		t.Errorf("status: settled %v after %d pairs (spread %v), its own wall clock %.1f ns against %.1f; want settled, the clocks agreeing", sc.Settled, sc.Pairs, sc.SpreadNs, sc.WallClockNsPerRun, sc.NsPerRun)
	}
	if math.Abs(sc.RunsPerSec/kernelRate-1) > 0.15 {
		t.Errorf("status: %.0f runs/s on the host, the kernel's run counts (bpftool) %.0f", sc.RunsPerSec, kernelRate)
	}
	if want := kernelRate * wallCost / 1e7; sc.CPUPercent == nil || math.Abs(*sc.CPUPercent/want-1) > 0.4 {
		t.Errorf("status: stats cost %v%% of a CPU, the kernel's runs/s x the wall clock's cost %.3f%%", fmtPtr(sc.CPUPercent), want)
	}
	out := d.cli(t, "status")
	if !strings.Contains(out, "stats cost:") || !strings.Contains(out, "ns per run") {
		t.Errorf("status does not show the stats cost:\n%s", out)
	}
}

// wallClockStatsCost is privtest.StatsCostByWallClock measured twice
// (short batches, many rounds: a long one is rarely left alone on a busy
// host), the least of each (off, on). It fails the test unless the cost
// stands out from the mechanism's own noise on this host (how far its two
// measurements of the same batches fall apart, off or on) and is large
// enough that a figure of no cost at all would fail a comparison within
// 15% + 1 ns: bounds from this run, not from what a run of stats costs
// on some other CPU.
func wallClockStatsCost(t *testing.T) (off, on float64) {
	t.Helper()
	off1, on1 := privtest.StatsCostByWallClock(t, 41, 20000)
	off2, on2 := privtest.StatsCostByWallClock(t, 41, 20000)
	off, on = min(off1, off2), min(on1, on2)
	noise := max(math.Abs(off1-off2), math.Abs(on1-on2))
	t.Logf("the wall clock: stats cost %.1f ns/run (%.1f off, %.1f on), its two measurements %.1f/%.1f and %.1f/%.1f", on-off, off, on, off1, on1, off2, on2)
	if cost := on - off; cost <= 3*noise || cost <= 0.15*cost+1 {
		t.Fatalf("the wall clock sees stats cost %.1f ns/run: too little to tell from its own noise (%.1f ns apart) or to compare with", cost, noise)
	}
	return off, on
}

// runCounts is a load's own count of its runs, read every 2 ms, so that
// its runs between two of the daemon's points are read at their times.
type runCounts struct {
	mu    sync.Mutex
	times []time.Time
	runs  []uint64
}

// recordRuns reads l's count every 2 ms until the test ends.
func recordRuns(t *testing.T, l *steadyLoad) *runCounts {
	c := &runCounts{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			c.mu.Lock()
			c.times, c.runs = append(c.times, time.Now()), append(c.runs, l.runs.Load())
			c.mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	return c
}

// at is the count at when, between the readings either side of it.
func (c *runCounts) at(when time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := slices.BinarySearchFunc(c.times, when, func(t, w time.Time) int { return t.Compare(w) })
	switch {
	case i == 0:
		return float64(c.runs[0])
	case i == len(c.times):
		return float64(c.runs[i-1])
	}
	t0, t1 := c.times[i-1], c.times[i]
	f := float64(when.Sub(t0)) / float64(t1.Sub(t0))
	return float64(c.runs[i-1]) + f*(float64(c.runs[i])-float64(c.runs[i-1]))
}

// cpuHogs are processes that keep CPUs busy.
type cpuHogs []*exec.Cmd

// busyCPUs starts n shell loops that spin until stopped (or the test ends).
func busyCPUs(t *testing.T, n int) cpuHogs {
	t.Helper()
	var h cpuHogs
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		h = append(h, c)
	}
	t.Cleanup(h.stop)
	return h
}

func (h cpuHogs) stop() {
	for _, c := range h {
		if c.ProcessState == nil {
			c.Process.Kill()
			c.Wait()
		}
	}
}

// hostRunCount is the sum of every program's run_cnt, read by bpftool.
func hostRunCount(t *testing.T) uint64 {
	t.Helper()
	out, errOut, code := run("bpftool", "prog", "show", "-j")
	if code != 0 {
		t.Fatalf("bpftool prog show: %s %s", out, errOut)
	}
	var progs []struct {
		RunCnt uint64 `json:"run_cnt"`
	}
	if err := json.Unmarshal([]byte(out), &progs); err != nil {
		t.Fatalf("bpftool json: %v", err)
	}
	var n uint64
	for _, p := range progs {
		n += p.RunCnt
	}
	return n
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatFloat(*p, 'f', 3, 64)
}

// TestStatsCostRemeasured: the daemon measures bpf_stats' cost again on
// demand (status --measure-stats-cost) and when the online CPUs change
// (here a list of its own, rewritten by the test), each time a stats_cost
// event and status saying why; the figure matches the wall clock's, and
// the programs' counts over the interval whose stats went off for the
// measurement still match the workload's own count (the gap is scaled
// out). With stats on all the time there is no gap to scale: one line
// and a non-zero exit.
func TestStatsCostRemeasured(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	wallOff, wallOn := wallClockStatsCost(t)
	wallCost := wallOn - wallOff
	online := filepath.Join(t.TempDir(), "online")
	if err := os.WriteFile(online, []byte("0-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := uniqueName("remeasure")
	prog, err := privtest.LoadLoop(name, dutyLoopTurns)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	d := startDaemon(t, t.TempDir(), "--interval", "1s", "--profile.every", "0", "--debug.cpus-online-file", online)
	load := startLoad(t, prog)
	defer load.end()
	time.Sleep(2500 * time.Millisecond)

	// On demand, while the load runs: its runs over the interval whose
	// stats went off for the measurement are counted as the load counted
	// them, between the same two of the daemon's points.
	counts := recordRuns(t, load)
	time.Sleep(1500 * time.Millisecond) // counts from before the last point before the request
	t0 := time.Now()
	var st api.Status
	d.json(t, &st, "status", "--measure-stats-cost")
	t1 := time.Now()
	time.Sleep(2500 * time.Millisecond) // the measurement's interval, stored
	var pts []api.HistoryPoint
	d.json(t, &pts, "history", name, "--since", time.Since(t0).Round(time.Second).String()+"5s")
	a := slices.IndexFunc(pts, func(p api.HistoryPoint) bool { return !p.Time.Before(t0) }) - 1
	b := slices.IndexFunc(pts, func(p api.HistoryPoint) bool { return p.Time.After(t1.Add(1100 * time.Millisecond)) })
	if a < 0 || b < 0 {
		t.Fatalf("no history points around the measurement (%v to %v): %+v", t0, t1, pts)
	}
	for i := max(a-1, 1); i <= min(b+1, len(pts)-1); i++ {
		t.Logf("point %v: +%d runs stored, the load's +%.0f", pts[i].Time.Format("15:04:05.000"), pts[i].RunCnt-pts[i-1].RunCnt, counts.at(pts[i].Time)-counts.at(pts[i-1].Time))
	}
	got := float64(pts[b].RunCnt - pts[a].RunCnt)
	want := counts.at(pts[b].Time) - counts.at(pts[a].Time)
	sc := st.StatsCost
	t.Logf("on demand: %.1f ns/run (wall clock %.1f, %d pairs): %s; runs from %v to %v: %.0f stored, the load's own %.0f",
		sc.NsPerRun, wallCost, sc.Pairs, sc.Detail, pts[a].Time.Format("15:04:05.000"), pts[b].Time.Format("15:04:05.000"), got, want)
	if !sc.Measured || !strings.Contains(sc.Detail, "on demand") || !sc.MeasuredAt.After(st.StartedAt.Add(time.Second)) {
		t.Errorf("after --measure-stats-cost: measured %v at %v (started %v): %s; want measured again, on demand", sc.Measured, sc.MeasuredAt, st.StartedAt, sc.Detail)
	}
	// The wall clock cannot be read at the daemon's moment (its stats are
	// on), and this host's speed moves by a fifth within seconds (CI run
	// 19, 2026-11-28: 79.0 ns on demand, the daemon's own two clocks
	// agreeing, the pairs 79-85, where the wall clock had said 67.7 a
	// minute before): a figure off the wall clock is asked for again, up
	// to twice, a few seconds apart. A wrong method is wrong every time.
	demands := 1
	for try := 2; math.Abs(sc.NsPerRun-wallCost) > 0.15*wallCost+1; try++ {
		if try > 3 {
			t.Errorf("measured again: %.1f ns/run, the wall clock says %.1f, in three tries", sc.NsPerRun, wallCost)
			break
		}
		t.Logf("try %d: %.1f ns/run, the wall clock says %.1f; again", try-1, sc.NsPerRun, wallCost)
		time.Sleep(2 * time.Second)
		var again api.Status
		d.json(t, &again, "status", "--measure-stats-cost")
		sc = again.StatsCost
		demands++
	}
	if math.Abs(got/want-1) > 0.03 {
		t.Errorf("runs over the measurement's interval: stored %.0f, the load's own count %.0f", got, want)
	}

	// A CPU goes offline: measured again, saying so.
	if err := os.WriteFile(online, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, 15*time.Second, "a measurement after the hotplug", func() bool {
		return d.query(&st, "status") == nil && strings.Contains(st.StatsCost.Detail, "online CPUs changed from 0-1 to 0")
	})
	var evs []api.Event
	d.json(t, &evs, "events", "--since", "1m")
	var details []string
	for _, e := range evs {
		if e.Kind == "stats_cost" {
			details = append(details, e.Detail)
		}
	}
	onDemand := 0
	for _, detail := range details {
		if strings.HasPrefix(detail, "on demand: ") {
			onDemand++
		}
	}
	if len(details) != demands+1 || onDemand != demands || !strings.HasPrefix(details[len(details)-1], "after the online CPUs changed from 0-1 to 0: ") {
		t.Errorf("stats_cost events %q: want %d on demand, then one after the hotplug", details, demands)
	}
	d.stop(t, unix.SIGTERM)

	// Stats on all the time: refused, one line.
	d = startDaemon(t, t.TempDir(), "--stats.budget", "0", "--profile.every", "0")
	out, errOut, code := run(bin.cli, "--socket", d.socket, "status", "--measure-stats-cost")
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "stats are on all the time") {
		t.Errorf("--measure-stats-cost with --stats.budget 0: exit %d, %q %q; want one line saying stats are on all the time", code, out, errOut)
	}
}
