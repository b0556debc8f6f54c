package daemon_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// pace runs prog `batch` times every 10 ms until stop is called: a steady
// load whose runs/s does not depend on how long a run takes.
func pace(t *testing.T, prog *ebpf.Program, batch uint32) (stop func()) {
	return paceWith(t, 10*time.Millisecond, func() error {
		_, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: batch})
		return err
	})
}

// paceWith calls run every period until stopped.
func paceWith(t *testing.T, period time.Duration, run func() error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if err := run(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// loop loads a counted loop of n iterations under name and closes it when
// the test ends.
func loop(t *testing.T, name string, n int32) *ebpf.Program {
	t.Helper()
	prog, err := privtest.LoadLoop(name, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// nsPerRun reads prog's cumulative stats.
func nsPerRun(t *testing.T, prog *ebpf.Program) (ns, runs uint64) {
	st, err := prog.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return uint64(st.Runtime), st.RunCount
}

// regressionScenario runs three programs under steady load in d: one
// reloaded with 1.5x the work, one reloaded with the same code, one whose
// load doubles; a fourth, never changed, measures how much the machine
// itself drifted between the windows (after/before ns/run). It returns the
// findings and that drift.
func regressionScenario(t *testing.T, d *daemonProc, window time.Duration) (slower, same string, found []api.Regression, drift float64) {
	slower, same, busier := uniqueName("rg_slow"), uniqueName("rg_same"), uniqueName("rg_busy")
	old := loop(t, slower, 10000)
	stopOld := pace(t, old, 50)
	sameOld := loop(t, same, 10000)
	stopSameOld := pace(t, sameOld, 50)
	busy := loop(t, busier, 10000)
	stopBusy := pace(t, busy, 50)
	defer stopBusy()
	control := loop(t, uniqueName("rg_ctl"), 10000)
	stopControl := pace(t, control, 50)
	defer stopControl()
	time.Sleep(time.Second)
	ns0, runs0 := nsPerRun(t, control)
	time.Sleep(window)

	// Reload: the new instance takes the load, the old one goes.
	ns1, runs1 := nsPerRun(t, control)
	stopNew := pace(t, loop(t, slower, 15000), 50)
	defer stopNew()
	stopOld()
	old.Close()
	stopSameNew := pace(t, loop(t, same, 10000), 50)
	defer stopSameNew()
	stopSameOld()
	sameOld.Close()
	stopBusy2 := pace(t, busy, 50) // twice the runs/s
	defer stopBusy2()
	time.Sleep(window)
	ns2, runs2 := nsPerRun(t, control)
	drift = (float64(ns2-ns1) / float64(runs2-runs1)) / (float64(ns1-ns0) / float64(runs1-runs0))

	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		d.json(t, &found, "regressions", "--since", "1h", "--prog", slower)
		if len(found) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Give a wrong finding on the others time to show up too.
	time.Sleep(2 * time.Second)
	var all []api.Regression
	d.json(t, &all, "regressions", "--since", "1h")
	for _, r := range all {
		if r.Program == same || r.Program == busier {
			found = append(found, r)
		}
	}
	return slower, same, found, drift
}

// A reload with 1.5x the work is one regression of about 1.5x; the same
// code reloaded, or the load doubled, is nothing. The machine is shared
// (and the scenario's own added load slows it): the daemon divides the
// ratio by the drift of the programs that did not change; a run where the
// test's own unchanged program drifted more than 25%, or whose ratio fell
// outside 1.35-1.65, is run again, up to three times (CI once read 1.337
// in 4-second windows; a daemon whose ratio is wrong fails all three).
func TestRegressionEndToEnd(t *testing.T) {
	privtest.Root(t)
	const window = 4 * time.Second
	web := freeAddr(t)
	d := startDaemon(t, t.TempDir(), "--regressions.window", window.String(), "--profile.every", "0", "--web.listen-address", web)
	var slower, same string
	var r api.Regression
	var drift float64
	for attempt := 1; ; attempt++ {
		var found []api.Regression
		slower, same, found, drift = regressionScenario(t, d, window)
		if len(found) != 1 {
			t.Fatalf("%d findings, want 1 (the slower reload): %+v\n%s", len(found), found, d.stderr)
		}
		r = found[0]
		if r.Kind != "regression" || r.Program != slower {
			t.Fatalf("finding %s of %s, want a regression of %s", r.Kind, r.Program, slower)
		}
		t.Logf("attempt %d: ratio %.3f [%.3f, %.3f], p=%.2g, %d+%d intervals, drift %.3f from %d controls; the test's control drifted x%.3f", attempt, r.Ratio, r.RatioLo, r.RatioHi, r.P, r.NBefore, r.NAfter, r.Drift, r.Controls, drift)
		steady := drift > 0.8 && drift < 1.25
		if steady && r.Ratio >= 1.35 && r.Ratio <= 1.65 {
			break
		}
		if attempt < 3 {
			continue
		}
		if !steady {
			t.Fatalf("the machine's speed drifted more than 25%% in each of 3 attempts (last x%.3f): cannot check the magnitude", drift)
		}
		t.Errorf("ratio %.3f [%.3f, %.3f] (corrected by the daemon for drift %.3f from %d controls; the test's control drifted %.3f), want within 1.35-1.65 in one of 3 attempts",
			r.Ratio, r.RatioLo, r.RatioHi, r.Drift, r.Controls, drift)
		break
	}
	if r.RatioLo > r.Ratio || r.RatioHi < r.Ratio || r.Controls < 1 {
		t.Errorf("ratio %.3f outside its interval [%.3f, %.3f], or no controls (%d)", r.Ratio, r.RatioLo, r.RatioHi, r.Controls)
	}
	if r.P >= 0.05 || r.NBefore < 8 || r.NAfter < 8 || r.OldTag == r.NewTag {
		t.Errorf("evidence %+v", r.Comparison)
	}
	if !strings.Contains(r.Explanation.Off, "profiling is off") {
		t.Errorf("explanation without profiling: %+v", r.Explanation)
	}

	// The event lists it; show prints it.
	var ev []api.Event
	d.json(t, &ev, "events", "--since", "1h", "--prog", slower)
	n := 0
	for _, e := range ev {
		if e.Kind == "regression" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d regression events of %s, want 1", n, slower)
	}
	// Prometheus counts it, by program.
	_, _, metrics := get(t, "http://"+web+"/metrics")
	series := fmt.Sprintf(`bpfperf_program_findings_total{kind="regression",name=%q,type="socket_filter"} 1`, slower)
	if !strings.Contains(string(metrics), series) {
		t.Errorf("/metrics has no %s", series)
	}
	if out := d.cli(t, "regressions", "show", r.ID); !strings.Contains(out, "regression "+r.ID) || !strings.Contains(out, "profiling is off") {
		t.Errorf("regressions show:\n%s", out)
	}

	// The gate.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"check", slower, "--max-regression", "10%"}, 1, "slower: " + slower},
		// check divides out the machine's drift as the detector does
		// (the neighbour is its control): the attempts accept a ratio up
		// to 1.65. Raw, with a drift of 1.29, CI read x1.888 once.
		{[]string{"check", slower, "--max-regression", "80%"}, 0, "ok: " + slower},
		{[]string{"check", slower}, 1, "divided out (median of "},
		{[]string{"check", slower, "--baseline", r.OldTag}, 1, "slower: "},
		{[]string{"check", same}, 2, "one version"},
		{[]string{"check", uniqueName("rg_none")}, 2, "no program named"},
		{[]string{"check", slower, "--baseline", "deadbeefdeadbeef"}, 2, "neither a time nor a tag"},
		{[]string{"check", slower, "--since", "2026-01-01T00:00:00Z", "--until", "2026-01-02T00:00:00Z"}, 2, "has no runs"},
		{[]string{"check", slower, "--max-regression", "ten"}, 2, "--max-regression"},
		{[]string{"regressions", "show", "nosuchid"}, 1, "no such regression"},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, tc.args...)...)
		out := stdout + stderr
		if code != tc.code || !strings.Contains(out, tc.says) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("bpfperf %s: exit %d, %q; want exit %d, one line with %q", strings.Join(tc.args, " "), code, out, tc.code, tc.says)
		}
	}
}
