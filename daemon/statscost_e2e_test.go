package daemon_test

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
	wallOff, wallOn := privtest.StatsCostByWallClock(t, 41, 20000)
	wallCost := wallOn - wallOff
	if wallCost < 5 {
		t.Fatalf("the wall clock sees stats cost %.1f ns/run (%.1f off, %.1f on): too little to compare with", wallCost, wallOff, wallOn)
	}
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
	// figure still matches the wall clock's, measured on a quiet host.
	hogs := busyCPUs(t, runtime.NumCPU())
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
	t.Logf("stats cost: %.1f ns/run (wall clock %.1f); runs/s %.0f (kernel via bpftool %.0f); cpu %v%%",
		sc.NsPerRun, wallCost, sc.RunsPerSec, kernelRate, fmtPtr(sc.CPUPercent))
	t.Logf("measured while %d processes kept the CPUs busy: %s", runtime.NumCPU(), sc.Detail)
	if math.Abs(sc.NsPerRun-wallCost) > 0.15*wallCost+1 {
		t.Errorf("stats cost %.1f ns/run, the wall clock says %.1f (%.1f off, %.1f on)", sc.NsPerRun, wallCost, wallOff, wallOn)
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
	// Short batches, many rounds: a long one is rarely left alone on a
	// busy host.
	wallOff, wallOn := privtest.StatsCostByWallClock(t, 41, 20000)
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

	// On demand, while the load runs: its runs over the measurement's
	// interval are counted as the load counted them.
	made0, t0 := load.runs.Load(), time.Now()
	var st api.Status
	d.json(t, &st, "status", "--measure-stats-cost")
	time.Sleep(2500 * time.Millisecond) // the measurement's interval, stored
	want := float64(load.runs.Load()-made0) / time.Since(t0).Seconds()
	got, _ := historyRate(t, d, name, time.Since(t0)+time.Second)
	sc := st.StatsCost
	t.Logf("on demand: %.1f ns/run (wall clock %.1f, %d pairs): %s; runs/s over it %.0f, the load's %.0f", sc.NsPerRun, wallCost, sc.Pairs, sc.Detail, got, want)
	if !sc.Measured || !strings.Contains(sc.Detail, "on demand") || !sc.MeasuredAt.After(st.StartedAt.Add(time.Second)) {
		t.Errorf("after --measure-stats-cost: measured %v at %v (started %v): %s; want measured again, on demand", sc.Measured, sc.MeasuredAt, st.StartedAt, sc.Detail)
	}
	if math.Abs(sc.NsPerRun-wallCost) > 0.15*wallCost+1 {
		t.Errorf("measured again: %.1f ns/run, the wall clock says %.1f", sc.NsPerRun, wallCost)
	}
	if math.Abs(got/want-1) > 0.05 {
		t.Errorf("runs/s over the measurement: daemon %.0f, the load's own count %.0f", got, want)
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
	if len(details) != 2 || !strings.HasPrefix(details[0], "on demand: ") || !strings.HasPrefix(details[1], "after the online CPUs changed from 0-1 to 0: ") {
		t.Errorf("stats_cost events %q: want one on demand, then one after the hotplug", details)
	}
	d.stop(t, unix.SIGTERM)

	// Stats on all the time: refused, one line.
	d = startDaemon(t, t.TempDir(), "--stats.budget", "0", "--profile.every", "0")
	out, errOut, code := run(bin.cli, "--socket", d.socket, "status", "--measure-stats-cost")
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "stats are on all the time") {
		t.Errorf("--measure-stats-cost with --stats.budget 0: exit %d, %q %q; want one line saying stats are on all the time", code, out, errOut)
	}
}
