package daemon_test

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestRegressionByTail (in the VM: TestLatencyInVM): a reload whose mean
// run time is the same but whose slowest 2% of runs take 1.5 times as
// long (and the rest a little less). The mean finds nothing; the latency windows of the two versions
// (--latency.programs) find the tail, and the finding says p99 decided it.
func TestRegressionByTail(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry/fexit: runs in the VM (TestLatencyInVM)")
	}
	privtest.Root(t)
	const window = 8 * time.Second
	d := startDaemon(t, t.TempDir(), "--regressions.window", window.String(),
		"--latency.programs", "rg_tail*", "--latency.window", "1s", "--latency.every", "3s")
	name := uniqueName("rg_tail")
	// 98% of runs 1,000 turns and 2% 20,000; then 796 and 30,000: the mean
	// stays within 0.1%, the slow 2% (so p99) grows by half. The slow path
	// is long enough to stand above the emulator's own slow runs (under
	// TCG the first run of each batch, after the pacer's sleep, takes 4-8
	// µs: 2% of runs too).
	old, err := privtest.LoadMix(name, 1000, 20000)
	if err != nil {
		t.Fatal(err)
	}
	stopOld := paceMix(t, old)
	// The detector follows a program once its identity is settled: a
	// reload before that is no new version of anything.
	eventually(t, "the program's identity to settle", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.IdentityID != ""
	})
	time.Sleep(window + time.Second)
	// The old version goes before the new one comes: loaded side by side,
	// the new one would be a second instance (its own identity, slot #2),
	// not a new version.
	stopOld()
	old.Close()
	newer, err := privtest.LoadMix(name, 796, 30000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { newer.Close() })
	stopNew := paceMix(t, newer)
	t.Cleanup(stopNew)

	var found []api.Regression
	deadline := time.Now().Add(window + 20*time.Second)
	for len(found) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		d.json(t, &found, "regressions", "--since", "1h", "--prog", name)
	}
	if len(found) != 1 {
		var h []api.LatencyWindow
		d.json(t, &h, "history", name, "--latency", "--since", "1h")
		t.Fatalf("findings %+v, want one; %d latency windows\n%s\n%s", found, len(h), d.cli(t, "events", "--since", "1h", "--prog", name), d.stderr)
	}
	r := found[0]
	t.Logf("finding: %s by %s; ns/run x%.3f (p=%.2g, %s); tail %+v", r.Kind, r.By, r.Ratio, r.P, r.Undecided, r.Tail)
	if r.Kind != "regression" || r.By != "p99" || r.Tail == nil || r.Tail.Ratio < 1.25 {
		t.Errorf("finding %s by %q, tail %+v: want a regression decided by p99, up 25%% or more", r.Kind, r.By, r.Tail)
	}
	t.Logf("$ bpfperf regressions show %s\n%s", r.ID, d.cli(t, "regressions", "show", r.ID))
	t.Logf("$ bpfperf history %s --latency\n%s", name, d.cli(t, "history", name, "--latency", "--since", "1h"))
	t.Logf("$ bpfperf history %s --step 1s\n%s", name, d.cli(t, "history", name, "--since", "1h", "--step", "1s"))
}

// paceMix runs prog's mix (every 50th run slow) in batches of 50 every
// 10 ms until stopped.
func paceMix(t *testing.T, prog *ebpf.Program) (stop func()) {
	return paceWith(t, func() error { return privtest.RunMix(prog, 50, 50) })
}
