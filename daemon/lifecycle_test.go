package daemon_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestHistorySurvivesRestart(t *testing.T) {
	privtest.Root(t)
	// Hold stats on ourselves too, so the runs made while no daemon runs
	// are counted by the kernel and must show up across the gap.
	privtest.LockStats(t)
	statsFD, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer statsFD.Close()
	state := t.TempDir()
	name := uniqueName("e2e_hist")
	prog, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	d := startDaemon(t, state)
	// Run the program while the first daemon samples it.
	for range 5 {
		privtest.Run(prog, 100)
		time.Sleep(200 * time.Millisecond)
	}
	// Stop only once the daemon has sampled the last batch.
	eventually(t, "the first daemon to see 500 runs", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.RunCnt == 500 && p.LastSample.After(time.Now().Add(-300*time.Millisecond))
	})
	time.Sleep(300 * time.Millisecond) // one more sample of the same counters
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.stderr)
	}
	stoppedAt := time.Now()
	privtest.Run(prog, 1000) // runs while no daemon watches
	time.Sleep(2 * time.Second)
	d = startDaemon(t, state)
	restartedAt := time.Now()
	// Keep it busy: idle programs are only stored once a minute.
	for range 5 {
		privtest.Run(prog, 100)
		time.Sleep(200 * time.Millisecond)
	}
	eventually(t, "the second daemon to see 2000 runs", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.RunCnt == 2000
	})

	var points []api.HistoryPoint
	d.json(t, &points, "history", name, "--since", "2m")
	if len(points) < 10 {
		t.Fatalf("history has %d points, want the samples of both daemons", len(points))
	}
	var gaps []time.Duration
	for i := 1; i < len(points); i++ {
		if gap := points[i].Time.Sub(points[i-1].Time); gap > time.Second {
			gaps = append(gaps, gap)
			if points[i-1].Time.After(stoppedAt) || points[i].Time.Before(restartedAt.Add(-time.Second)) {
				t.Errorf("gap %v from %v is not the downtime %v..%v", gap, points[i-1].Time, stoppedAt, restartedAt)
			}
			// Counters are cumulative: the runs made while the daemon was
			// down show up across the gap.
			if runs := points[i].RunCnt - points[i-1].RunCnt; runs != 1000 {
				t.Errorf("runs across the gap = %d, want 1000", runs)
			}
		}
	}
	if len(gaps) != 1 {
		t.Errorf("history has gaps %v, want exactly one (the downtime)", gaps)
	}
	last := points[len(points)-1]
	if last.RunCnt != 2000 {
		t.Errorf("last run_cnt = %d, want 2000", last.RunCnt)
	}

	// --step keeps the last sample per step, so the total is unchanged.
	var coarse []api.HistoryPoint
	d.json(t, &coarse, "history", name, "--since", "2m", "--step", "1m")
	if len(coarse) == 0 || len(coarse) > 3 || coarse[len(coarse)-1].RunCnt != 2000 {
		t.Errorf("history --step 1m = %+v", coarse)
	}
}

func TestProgramsComeAndGoWithoutBeingHeld(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	d := startDaemon(t, t.TempDir())
	pid := d.cmd.Process.Pid
	time.Sleep(300 * time.Millisecond)

	for round := range 3 {
		name := uniqueName(fmt.Sprintf("e2e_gone%d_", round))
		prog, err := privtest.LoadSocketFilter(name)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := prog.Info()
		id, _ := info.ID()
		eventually(t, "the daemon to list the new program", func() bool {
			var rows []api.ProgRow
			return d.query(&rows, "progs") == nil && hasProg(rows, uint32(id), true)
		})
		prog.Close()
		// The owner let go: the kernel must free it although the daemon
		// keeps sweeping.
		eventually(t, "the kernel to free the program", func() bool {
			_, ok := bpftoolProg(t, uint32(id))
			return !ok
		})
		eventually(t, "the daemon to mark it unloaded", func() bool {
			var loaded, all []api.ProgRow
			return d.query(&loaded, "progs") == nil && !hasProg(loaded, uint32(id), true) &&
				d.query(&all, "progs", "--all") == nil && hasProg(all, uint32(id), false)
		})
		var events []api.Event
		d.json(t, &events, "events", "--since", "1m")
		kinds := map[string]bool{}
		for _, e := range events {
			if e.ID == uint32(id) {
				kinds[e.Kind] = true
			}
		}
		if !kinds["loaded"] || !kinds["unloaded"] {
			t.Errorf("events for program %d: %v, want loaded and unloaded", id, kinds)
		}
	}
	// Program and link fds may only be open for the microseconds of a
	// sweep.
	if fewest := fdsHeldBetweenTicks(t, pid); fewest != 0 {
		t.Errorf("bpfperfd keeps %d program or link fds open between ticks", fewest)
	}
}

func hasProg(rows []api.ProgRow, id uint32, loaded bool) bool {
	for _, r := range rows {
		if r.ID == id && r.Loaded == loaded {
			return true
		}
	}
	return false
}

const sysctl = "/proc/sys/kernel/bpf_stats_enabled"

func readSysctl(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(sysctl)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func writeSysctl(t *testing.T, v string) {
	t.Helper()
	if err := os.WriteFile(sysctl, []byte(v), 0); err != nil {
		t.Fatal(err)
	}
}

// statsOffBaseline takes the stats lock and makes sure nothing else keeps
// stats on, so on/off can be observed.
func statsOffBaseline(t *testing.T) {
	t.Helper()
	privtest.LockStats(t)
	orig := readSysctl(t)
	t.Cleanup(func() { writeSysctl(t, orig) })
	writeSysctl(t, "0")
	if on, err := privtest.StatsCounting(); err != nil || on {
		privtest.Skip(t, fmt.Sprintf("another process holds BPF stats on (err %v); cannot observe on/off", err))
	}
}

func counting(t *testing.T) bool {
	t.Helper()
	on, err := privtest.StatsCounting()
	if err != nil {
		t.Fatal(err)
	}
	return on
}

func TestStatsRestoredInFDMode(t *testing.T) {
	privtest.Root(t)
	statsOffBaseline(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL} {
		d := startDaemon(t, t.TempDir(), "--stats-mode", "auto")
		var st api.Status
		d.json(t, &st, "status")
		if st.StatsMode != "fd" {
			t.Fatalf("stats_mode = %q, want fd", st.StatsMode)
		}
		if !counting(t) {
			t.Fatal("stats are not counting while the daemon holds its fd")
		}
		if got := readSysctl(t); got != "0" {
			t.Errorf("fd mode changed the sysctl to %s", got)
		}
		err := d.stop(t, sig)
		if sig != syscall.SIGKILL && err != nil {
			t.Errorf("exit on %v: %v\n%s", sig, err, d.stderr)
		}
		if counting(t) || readSysctl(t) != "0" {
			t.Errorf("after %v stats are still on (sysctl %s)", sig, readSysctl(t))
		}
	}
}

func TestStatsRestoredInSysctlMode(t *testing.T) {
	privtest.Root(t)
	statsOffBaseline(t)

	t.Run("was 0", func(t *testing.T) {
		d := startDaemon(t, t.TempDir(), "--stats-mode", "sysctl")
		var st api.Status
		d.json(t, &st, "status")
		if st.StatsMode != "sysctl" || readSysctl(t) != "1" || !counting(t) {
			t.Fatalf("mode %q, sysctl %s: want sysctl mode with the sysctl at 1", st.StatsMode, readSysctl(t))
		}
		if err := d.stop(t, syscall.SIGTERM); err != nil {
			t.Errorf("exit: %v", err)
		}
		if got := readSysctl(t); got != "0" || counting(t) {
			t.Errorf("after SIGTERM the sysctl is %s, want 0 as found", got)
		}
	})
	t.Run("was 1", func(t *testing.T) {
		writeSysctl(t, "1")
		d := startDaemon(t, t.TempDir(), "--stats-mode", "sysctl")
		d.stop(t, syscall.SIGINT)
		if got := readSysctl(t); got != "1" {
			t.Errorf("the daemon found 1 and left %s", got)
		}
		writeSysctl(t, "0")
	})
	t.Run("panic", func(t *testing.T) {
		d := startDaemon(t, t.TempDir(), "--stats-mode", "sysctl", "--debug.panic-after", "500ms")
		var err error
		select {
		case err = <-d.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the daemon did not panic")
		}
		if err == nil || !strings.Contains(d.stderr.String(), "panic") {
			t.Fatalf("want a panic exit, got %v\n%s", err, d.stderr)
		}
		if got := readSysctl(t); got != "0" {
			t.Errorf("after a panic the sysctl is %s, want 0 as found", got)
		}
	})
}
