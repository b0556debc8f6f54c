package daemon_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// progsCountersRow returns the row of id in `progs --counters -o json`, and
// the row as raw JSON keys.
func progsCountersRow(t *testing.T, d *daemonProc, id uint32) (api.ProgRow, map[string]json.RawMessage) {
	t.Helper()
	out := d.cli(t, "progs", "--counters", "-o", "json")
	var rows []api.ProgRow
	var raws []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("progs --counters -o json: %v\n%.300s", err, out)
	}
	json.Unmarshal([]byte(out), &raws)
	for i, r := range rows {
		if r.ID == id {
			return r, raws[i]
		}
	}
	return api.ProgRow{}, nil
}

// TestSampledCountersEndToEnd: a busy program run in a loop gets, from each
// 1 s continuous profile window, a sampled cpu-clock ns/run that agrees
// with bpf_stats' ns/run; an idle program gets no per-run figure at all.
//
// Tolerance: samples landing in a program are close to Poisson, so an
// estimate from n samples has a relative standard error of about 1/√n.
// The test waits for a window with at least 400 samples (1000 Hz: one
// core spinning gives ~700 here): 1/√400 = 5%, and 20% is 4σ. The first
// windows after the fix read -2.3%, -4.9%, +0.5% and -3.0% (2026-11-27).
func TestSampledCountersEndToEnd(t *testing.T) {
	privtest.Root(t)
	// Stats on all the time: under the default budget a busy program's
	// runs are scaled from a 2 ms on part, whose error (issue 45) the
	// sampled figure would carry (up to -28% here).
	d := startDaemon(t, t.TempDir(), "--profile.every", "1s", "--profile.hz", "1000", "--stats.budget", "0")
	hot := uniqueName("e2e_shot")
	hotID, _ := hotProgram(t, hot)
	idle, err := privtest.LoadSocketFilter(uniqueName("e2e_sidle"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	info, _ := idle.Info()
	idleID, _ := info.ID()

	// Two windows at most, for a host whose speed moves within one; a
	// sampler that mis-scales is off in both. CI once read -36.8%: the
	// runs counted from before the window's samples (below), and scaled
	// from the default budget's on part.
	var row api.ProgRow
	var pc *api.PerfCounters
	var after time.Time
	for try := 1; ; try++ {
		eventually(t, "a sampled window with 400 samples", func() bool {
			row, _ = progsCountersRow(t, d, hotID)
			pc = row.PerfCounters
			return pc != nil && pc.Mechanism == "sampled" && pc.CPUClockNsPerRun != nil && pc.Samples >= 400 && pc.WindowStart.After(after)
		})
		got, statsNs := *pc.CPUClockNsPerRun, statsNsAround(t, d, hot, pc)
		// The runs divided are those of the samples' window: the stored
		// series read at its edges. The first window after the program
		// loaded once counted runs from before the kernel filter's
		// set-up, 250 ms ahead of its samples (+25%).
		if want := runsOver(t, d, hot, pc); math.Abs(float64(pc.CountedRuns)-want) > 0.05*want {
			t.Errorf("window %s..%s: counted %d runs, the stored series says %.0f over the window: want within 5%%",
				pc.WindowStart.Format("15:04:05.000"), pc.WindowEnd.Format("15:04:05.000"), pc.CountedRuns, want)
		}
		t.Logf("window %s..%s: %d samples, %d runs, sampled %.0f ns/run (%.2f ms in window), bpf_stats %.0f ns/run (since load %.0f): %+.1f%%",
			pc.WindowStart.Format("15:04:05.000"), pc.WindowEnd.Format("15:04:05.000"), pc.Samples, pc.CountedRuns, got, pc.Totals["cpu-clock"]/1e6, statsNs, *row.AvgNsSinceLoad, 100*(got-statsNs)/statsNs)
		if math.Abs(got-statsNs) <= 0.2*statsNs {
			break
		}
		if try == 2 {
			t.Errorf("sampled %.0f ns/run vs bpf_stats %.0f ns/run: more than 20%% apart with %d samples, in two windows", got, statsNs, pc.Samples)
			break
		}
		after = pc.WindowStart
	}
	if row.RunCnt == 0 || pc.CountedRuns == 0 || pc.CountedRuns > row.RunCnt {
		t.Errorf("counted runs %d of run_cnt %d", pc.CountedRuns, row.RunCnt)
	}

	// show names the mechanism too.
	var det api.ProgDetail
	d.json(t, &det, "show", hot, "-o", "json")
	if det.PerfCounters == nil || det.PerfCounters.Mechanism != "sampled" || det.PerfCounters.CPUClockNsPerRun == nil {
		t.Errorf("show -o json: perf_counters %+v", det.PerfCounters)
	}
	// history --counters lists the windows, mechanism sampled.
	var pts []api.CounterHistoryPoint
	d.json(t, &pts, "history", hot, "--counters")
	if len(pts) == 0 || pts[len(pts)-1].Mechanism != "sampled" || pts[len(pts)-1].CPUClockNsPerRun == nil {
		t.Errorf("history --counters: %+v", pts)
	}
	table := d.cli(t, "progs", "--counters")
	if !strings.Contains(table, "sampled") || !strings.Contains(table, "CPU-CLOCK/RUN") {
		t.Errorf("progs --counters:\n%s", table)
	}

	// The idle program: absent, not zero.
	r, raw := progsCountersRow(t, d, uint32(idleID))
	if raw == nil {
		t.Fatalf("idle program %d not listed", idleID)
	}
	if r.PerfCounters != nil {
		t.Errorf("idle program has perf counters %+v", r.PerfCounters)
	}
	for k := range raw {
		if strings.Contains(k, "per_run") && k != "avg_ns_per_run_since_load" {
			t.Errorf("idle program's row has %q: %s", k, raw[k])
		}
	}
}

// TestSampledCountersTailCall: a tail-call target's samples are its own, so
// it gets sampled cpu-clock ns while bpf_stats counts no run of it: the
// per-run figures stay absent.
func TestSampledCountersTailCall(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "1s", "--profile.hz", "1000")
	target, err := privtest.LoadLoop(uniqueName("e2e_stgt"), 3000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	entry, jump, err := privtest.LoadTailCallEntry(uniqueName("e2e_sent"), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { entry.Close(); jump.Close() })
	info, _ := target.Info()
	tid, _ := info.ID()
	spin(t, entry)

	var row api.ProgRow
	var raw map[string]json.RawMessage
	eventually(t, "the tail-call target's sampled window", func() bool {
		row, raw = progsCountersRow(t, d, uint32(tid))
		return row.PerfCounters != nil && row.PerfCounters.Samples >= 50
	})
	pc := row.PerfCounters
	t.Logf("target: run_cnt %d, %d samples, %.2f ms sampled in the window, per-run %v", row.RunCnt, pc.Samples, pc.Totals["cpu-clock"]/1e6, pc.CPUClockNsPerRun)
	if row.RunCnt != 0 || pc.CountedRuns != 0 {
		t.Errorf("target run_cnt %d, counted %d: the kernel should charge the entry program", row.RunCnt, pc.CountedRuns)
	}
	if pc.Mechanism != "sampled" || pc.Totals["cpu-clock"] <= 0 {
		t.Errorf("target: %+v, want sampled ns", pc)
	}
	if pc.CPUClockNsPerRun != nil || strings.Contains(string(raw["perf_counters"]), "per_run") {
		t.Errorf("target has a per-run figure: %s", raw["perf_counters"])
	}
	if out := d.cli(t, "show", row.Name); !strings.Contains(out, "no runs counted") {
		t.Errorf("show does not say why per-run is absent:\n%s", out)
	}
}

// runsOver is prog's runs over pc's window by the stored series, read at
// the window's edges by linear interpolation between the points around
// each.
func runsOver(t *testing.T, d *daemonProc, prog string, pc *api.PerfCounters) float64 {
	t.Helper()
	pts := historyAround(t, d, prog, pc, time.Second)
	at := func(when time.Time) float64 {
		for i := 1; i < len(pts); i++ {
			a, b := pts[i-1], pts[i]
			if !a.Time.After(when) && b.Time.After(when) {
				f := float64(when.Sub(a.Time)) / float64(b.Time.Sub(a.Time))
				return float64(a.RunCnt) + f*float64(b.RunCnt-a.RunCnt)
			}
		}
		t.Fatalf("no stored points around %s: %+v", when.Format("15:04:05.000"), pts)
		return 0
	}
	return at(pc.WindowEnd) - at(pc.WindowStart)
}

// statsNsAround is bpf_stats' ns/run of prog over pc's window: the stored
// series across the window's edges.
func statsNsAround(t *testing.T, d *daemonProc, prog string, pc *api.PerfCounters) float64 {
	t.Helper()
	pts := historyAround(t, d, prog, pc, 300*time.Millisecond)
	var ns, runs float64
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		ns += float64(b.RunTimeNs - a.RunTimeNs)
		runs += float64(b.RunCnt - a.RunCnt)
	}
	if runs == 0 {
		t.Fatalf("no runs in the stored series around the window: %+v", pts)
	}
	return ns / runs
}

// historyAround is prog's stored series from margin before pc's window to
// margin after it.
func historyAround(t *testing.T, d *daemonProc, prog string, pc *api.PerfCounters, margin time.Duration) []api.HistoryPoint {
	t.Helper()
	var pts []api.HistoryPoint
	d.json(t, &pts, "history", prog, "--since", pc.WindowStart.Add(-margin).Format(time.RFC3339Nano), "--until", pc.WindowEnd.Add(margin).Format(time.RFC3339Nano))
	return pts
}
