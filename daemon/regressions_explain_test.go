package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// loadWorkProgram loads one of work.c's programs under name.
func loadWorkProgram(t *testing.T, prog, name string) *ebpf.Program {
	t.Helper()
	spec, err := loadWork()
	if err != nil {
		t.Fatal(err)
	}
	ps := spec.Programs[prog]
	ps.Name = name
	p, err := ebpf.NewProgram(ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// progLoadedAt is when the kernel loaded p, by the wall clock.
func progLoadedAt(t *testing.T, p *ebpf.Program) time.Time {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	sinceBoot, ok := info.LoadTime()
	if !ok {
		t.Fatal("program info has no load time")
	}
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return now.Add(sinceBoot - time.Duration(ts.Nano()))
}

// A reload that adds a loop on a line of its own: the finding's
// explanation puts that line on top, and its profile diff opens in pprof.
func TestRegressionExplained(t *testing.T) {
	privtest.Root(t)
	const window = 4 * time.Second
	d := startDaemon(t, t.TempDir(), "--regressions.window", window.String(), "--profile.every", "1s", "--profile.duration", "1s", "--profile.hz", "499")
	name := uniqueName("rg_work")
	old := loadWorkProgram(t, "work", name)
	stopOld := pace(t, old, 100)
	time.Sleep(window + time.Second)
	next := loadWorkProgram(t, "work_more", name)
	stopNew := pace(t, next, 100)
	t.Cleanup(stopNew)
	stopOld()
	old.Close()

	var found []api.Regression
	deadline := time.Now().Add(window + 10*time.Second)
	for len(found) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		d.json(t, &found, "regressions", "--since", "1h", "--prog", name)
	}
	if len(found) != 1 || found[0].Kind != "regression" {
		t.Fatalf("findings %+v, want one regression\n%s", found, d.stderr)
	}
	r := found[0]
	ex := r.Explanation
	var top *api.Change
	for i, c := range ex.Top {
		if c.Level == "line" {
			top = &ex.Top[i]
			break
		}
	}
	t.Logf("ratio %.3f; explanation %+v", r.Ratio, ex)
	if ex.Off != "" || top == nil {
		t.Fatalf("no line in the explanation: %+v", ex)
	}
	// New in the after window, nothing before: the old version has no
	// extra_work, and the before window ends at the new version's load.
	// The new version runs from its load, before the sweep that dates the
	// change; with the before window ending at that sweep, a profile
	// window that ended in between held 4-12 ms of it (here, 2 of 4 runs;
	// CI: 0.53% before, 3.9% after).
	if !strings.HasPrefix(top.Name, "extra_work work.c:") || top.After <= 0 || top.Before != 0 {
		t.Errorf("top changed line %+v, want extra_work's line in work.c, new in the after window and none before", *top)
	}
	if loaded := progLoadedAt(t, next); r.BeforeTo.Sub(loaded).Abs() > 5*time.Millisecond {
		t.Errorf("before window ends at %v, want the new version's load %v (changed %v)", r.BeforeTo, loaded, r.Changed)
	}
	out := d.cli(t, "regressions", "show", r.ID, "-o", filepath.Join(t.TempDir(), "diff.pb.gz"))
	if !strings.Contains(out, top.Name) || !strings.Contains(out, "go tool pprof") {
		t.Errorf("regressions show does not name %q or the pprof command:\n%s", top.Name, out)
	}
	file := strings.Fields(out[strings.LastIndex(out, "go tool pprof -top ")+len("go tool pprof -top "):])[0]
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	if top := pprofTop(t, file); !strings.Contains(top, "extra_work") {
		t.Errorf("pprof -top of the diff does not show extra_work:\n%s", top)
	}
}

// A tail-call target swapped for a slower one: the entry program's
// ns/run steps up with no reload of its own (the kernel counts the
// target's time in its entry's stats), so it is a shift of the entry (a
// steady neighbour beside it tells the machine's drift), and the
// explanation names the target that grew.
func TestShiftOfTailCallTarget(t *testing.T) {
	privtest.Root(t)
	const shiftWindow = 6 * time.Second
	d := startDaemon(t, t.TempDir(), "--regressions.window", "4s", "--regressions.shift-window", shiftWindow.String(),
		"--profile.every", "1s", "--profile.duration", "1s", "--profile.hz", "499")
	spec, err := loadWork()
	if err != nil {
		t.Fatal(err)
	}
	delete(spec.Programs, "work_more")
	entry, slow := uniqueName("rg_tce"), uniqueName("rg_tcs")
	spec.Programs["tc_entry"].Name = entry
	spec.Programs["tc_target_more"].Name = slow
	// A neighbour that never changes: shifts are only claimed where
	// another program tells the machine's own drift.
	spec.Programs["work"].Name = uniqueName("rg_tcn")
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	targets := coll.Maps["targets"]
	if err := targets.Put(uint32(0), coll.Programs["tc_target"]); err != nil {
		t.Fatal(err)
	}
	stop := pace(t, coll.Programs["tc_entry"], 100)
	defer stop()
	stopNeighbour := pace(t, coll.Programs["work"], 100)
	defer stopNeighbour()
	time.Sleep(2*shiftWindow + 2*time.Second) // two windows of the first target
	if err := targets.Put(uint32(0), coll.Programs["tc_target_more"]); err != nil {
		t.Fatal(err)
	}

	var found []api.Regression
	deadline := time.Now().Add(2*shiftWindow + 15*time.Second)
	for len(found) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		d.json(t, &found, "regressions", "--since", "1h", "--prog", entry)
	}
	if len(found) != 1 {
		t.Fatalf("findings %+v, want one shift of %s\n%s", found, entry, d.stderr)
	}
	r := found[0]
	t.Logf("%s of %s: ratio %.3f [%.3f, %.3f], p=%.2g, %d+%d intervals, dated %v; explanation %+v", r.Kind, r.Program, r.Ratio, r.RatioLo, r.RatioHi, r.P, r.NBefore, r.NAfter, r.Changed, r.Explanation)
	if r.Kind != "shift" || r.OldTag != r.NewTag || r.Ratio < 1.25 {
		t.Errorf("finding %s %s -> %s ratio %.3f, want a shift of the same tag, about 1.5x", r.Kind, r.OldTag, r.NewTag, r.Ratio)
	}
	var named bool
	for _, c := range r.Explanation.Top {
		if c.Level == "program" && strings.Contains(c.Name, slow) && c.After > c.Before {
			named = true
		}
	}
	if !named {
		t.Errorf("the explanation does not name the slower target %s: %+v", slow, r.Explanation)
	}
}
