package daemon_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestRegressionByTail (in the VM: TestDaemonInVM): a reload whose mean
// run time is the same but whose slow runs, a third as many, take three
// times as long. The mean finds nothing; the latency windows of the two versions
// (--latency.programs) find the tail, and the finding says p99 decided it.
func TestRegressionByTail(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry/fexit: runs in the VM (TestDaemonInVM)")
	}
	privtest.Root(t)
	// --regressions.min-change 20%: the emulated VM's mean wanders by
	// 10-15% between windows; the tail below triples.
	d := startDaemon(t, t.TempDir(), "--regressions.window", tailWindow.String(), "--regressions.min-change", "20%",
		"--latency.programs", "rg_tail*", "--latency.window", "1s", "--latency.every", "2s")
	// A neighbour that runs one version throughout: the detector divides
	// the machine's own drift out of the mean by it (the emulated VM's
	// speed wanders by 10% and more from one 8 s window to the next).
	control, err := privtest.LoadMix(uniqueName("rg_ctl"), 1000, 15000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { control.Close() })
	t.Cleanup(paceMix(t, control, 25))
	// Under TCG a program loaded anew may run its same code 8% faster or
	// slower than the one before it, and the whole VM half as fast for a
	// while, so the mean may move by more than the design's 0% (rightly a
	// finding of its own) and the tail by less than its 200% (a 2x tail
	// once measured only 1.19x). The latency windows measure both
	// exactly: a reload whose windows' mean grew by less than 15% (the
	// detector ignores 20%) and whose p99 grew by 50% or more is the case
	// under test, tried up to 3 times; a try the emulator spoiled may end
	// with no finding at all. A mean that fell is no spoiled try: it cannot
	// make a regression, so the tail must still decide one (CI on an AMD
	// host saw the windows' means x0.74-0.81 in all three tries, each
	// rightly a regression by p99, which a gate of 15% either way threw
	// away).
	for try := 1; try <= 3; try++ {
		r, found, meanRatio, p99Ratio := reloadWithSlowerTail(t, d)
		t.Logf("try %d: finding %v: %s by %s; ns/run x%.3f (p=%.2g); the windows' means x%.3f, p99 x%.3f; tail %+v", try, found, r.Kind, r.By, r.Ratio, r.P, meanRatio, p99Ratio, r.Tail)
		if meanRatio > 1.15 || p99Ratio < 1.5 {
			continue
		}
		// bpf_stats outside the windows (what the detector compares) may
		// still see the mean move under TCG: once x1.24 where the windows
		// saw x1.07. Then the mean rightly decides, and the tail must
		// still be reported beside it.
		if found && r.By == "mean" {
			if r.Tail == nil || r.Tail.Ratio < 1.2 {
				t.Fatalf("finding by the mean without the tail beside it: tail %+v", r.Tail)
			}
			continue
		}
		if !found || r.Kind != "regression" || r.By != "p99" || r.Tail == nil || r.Tail.Ratio < 1.2 {
			t.Fatalf("finding %v: %s by %q, tail %+v: want a regression decided by p99, up 20%% or more (200%% by design)\n%s", found, r.Kind, r.By, r.Tail, d.stderr)
		}
		t.Logf("$ bpfperf regressions show %s\n%s", r.ID, d.cli(t, "regressions", "show", r.ID))
		return
	}
	t.Fatal("in 3 tries the emulator never ran the new version's mean less than 15% above the old one's with the p99 50% apart")
}

// tailWindow is the regression window of TestRegressionByTail.
const tailWindow = 8 * time.Second

// reloadWithSlowerTail loads a program, runs it, reloads it with a slower
// tail, waits for the detector's finding, and returns it (found false if
// none came) with the ratios (new over old) of the two versions' means and
// of the medians of their windows' p99, as their latency windows measured
// them.
func reloadWithSlowerTail(t *testing.T, d *daemonProc) (r api.Regression, found bool, meanRatio, p99Ratio float64) {
	t.Helper()
	name := uniqueName("rg_tail")
	// Runs of 1,000 turns, one in 25 of 15,000; then one in 75 of 45,000:
	// the fast path stays the same and the mean within 2% (the slow runs
	// add 600 turns per run to both), the slow runs (so p99) take three
	// times as long. Both slow shares are above 1%, so p99 is a slow run.
	// The slow path is long enough to stand above the emulator's own slow
	// runs (under TCG the first run of each batch, after the pacer's
	// sleep, takes 4-8 µs).
	old, err := privtest.LoadMix(name, 1000, 15000)
	if err != nil {
		t.Fatal(err)
	}
	stopOld := paceMix(t, old, 25)
	// The detector follows a program once its identity is settled: a
	// reload before that is no new version of anything.
	eventually(t, "the program's identity to settle", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.IdentityID != ""
	})
	// Past the window, and a few seconds more: the first seconds of a
	// freshly loaded program run slow under emulation.
	time.Sleep(tailWindow + 4*time.Second)
	// The old version goes before the new one comes: loaded side by side,
	// the new one would be a second instance (its own identity, slot #2),
	// not a new version.
	stopOld()
	old.Close()
	newer, err := privtest.LoadMix(name, 1000, 45000)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	defer paceMix(t, newer, 75)()
	newID := progID(t, newer)

	var findings []api.Regression
	deadline := time.Now().Add(tailWindow + 20*time.Second)
	for len(findings) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		d.json(t, &findings, "regressions", "--since", "1h", "--prog", name)
	}
	var h []api.LatencyWindow
	d.json(t, &h, "history", name, "--latency", "--since", "1h")
	switch len(findings) {
	case 0:
		t.Logf("no finding; %d latency windows\n%s", len(h), d.cli(t, "events", "--since", "1h", "--prog", name))
	case 1:
		r, found = findings[0], true
	default:
		t.Fatalf("findings %+v, want at most one", findings)
	}
	var sums [2]float64
	var runs [2]uint64
	var p99s [2][]float64
	for _, w := range h {
		side := 0
		if w.ID == newID {
			side = 1
		}
		sums[side] += (w.MeanNs + w.FloorNs) * float64(w.Runs)
		runs[side] += w.Runs
		p99s[side] = append(p99s[side], w.P99Ns)
	}
	if runs[0] == 0 || runs[1] == 0 {
		t.Fatalf("latency windows of one version missing: %+v", h)
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	return r, found, (sums[1] / float64(runs[1])) / (sums[0] / float64(runs[0])), median(p99s[1]) / median(p99s[0])
}

// paceMix runs prog's mix, every slowEvery-th run slow, in batches of 160
// every 32 ms until stopped: the same runs/s whatever the mix (the
// detector compares intervals at matched load), 5,000 a second.
func paceMix(t *testing.T, prog *ebpf.Program, slowEvery int) (stop func()) {
	return paceWith(t, 32*time.Millisecond, func() error { return privtest.RunMix(prog, 160, slowEvery) })
}
