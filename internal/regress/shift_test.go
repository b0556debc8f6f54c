package regress

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// One version whose ns/run steps up 50% after two windows, beside a
// neighbour that does not, is one shift, dated within a few samples of
// the step, with its ratio; steady noise and the windows after the step
// are none; a reload starts its series anew.
func TestShift(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShiftWindow = time.Minute // buckets of one second: a sample each
	rng := rand.New(rand.NewPCG(9, 10))
	tr := NewTracker(cfg)
	var found []*Finding
	// A neighbour that never changes tells the machine's drift.
	feed := func(tag string, from time.Time, n int, ns float64) {
		ctl := noisy(rng, from, n, 80, 0.05, 500)
		for i, s := range noisy(rng, from, n, ns, 0.05, 500) {
			tr.Observe("socket_filter/neighbour", "nnnn", ctl[i])
			if f := tr.Observe("socket_filter/x", tag, s); f != nil {
				found = append(found, f)
			}
		}
	}
	feed("aaaa", t0, 180, 100)
	if len(found) != 0 {
		t.Fatalf("steady: %d findings %+v", len(found), found[0])
	}
	step := t0.Add(180 * time.Second)
	feed("aaaa", step, 600, 150)
	if len(found) != 1 {
		t.Fatalf("a 50%% step: %d findings, want 1", len(found))
	}
	f := found[0]
	if f.Kind != KindShift || f.OldTag != "aaaa" || f.NewTag != "aaaa" || f.Ratio < 1.4 || f.Ratio > 1.6 {
		t.Errorf("finding %s %s->%s ratio %.2f, want a shift of about 1.5 on aaaa", f.Kind, f.OldTag, f.NewTag, f.Ratio)
	}
	if d := f.Changed.Sub(step); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("dated %v from the step, want within 5 s", d)
	}
	if f.NBefore < cfg.MinSamples || f.NAfter < cfg.MinSamples || f.P >= cfg.Alpha {
		t.Errorf("evidence %+v", f.Comparison)
	}

	// A reload: the new version's series starts at the reload, so the
	// old version's history is no shift of the new one.
	found = nil
	feed("bbbb", step.Add(600*time.Second), 300, 150)
	for _, f := range found {
		if f.Kind == KindShift {
			t.Errorf("a shift across a reload: %+v", f)
		}
	}
}

// Every program slowing together is the machine, not a shift of one.
func TestShiftDrift(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShiftWindow = time.Minute
	rng := rand.New(rand.NewPCG(11, 12))
	tr := NewTracker(cfg)
	var found []*Finding
	for i := range 300 {
		at := t0.Add(time.Duration(i) * time.Second)
		slow := 1.0
		if i >= 150 {
			slow = 1.3
		}
		for _, k := range []string{"c1", "c2", "c3", "x"} {
			if f := tr.Observe(k, "cccc", noisy(rng, at, 1, 100*slow, 0.05, 500)[0]); f != nil {
				found = append(found, f)
			}
		}
	}
	if len(found) != 0 {
		t.Errorf("%d shifts when every program slowed 30%%: %+v", len(found), found[0])
	}
}

// Alone, a program's step cannot be told from the machine's: no shift.
func TestShiftNeedsANeighbour(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShiftWindow = time.Minute
	rng := rand.New(rand.NewPCG(13, 14))
	tr := NewTracker(cfg)
	series := append(noisy(rng, t0, 180, 100, 0.05, 500), noisy(rng, t0.Add(180*time.Second), 300, 150, 0.05, 500)...)
	for _, s := range series {
		if f := tr.Observe("socket_filter/alone", "aaaa", s); f != nil {
			t.Fatalf("a shift with no neighbour: %+v", f)
		}
	}
	st := tr.keys["socket_filter/alone"]
	w := tr.shiftWindows(series[len(series)-1].At.Add(-60 * time.Second))
	if r, _ := tr.compareShift("socket_filter/alone", &st.shift, w); r.Kind != "" || !strings.Contains(r.Undecided, "no other program") {
		t.Errorf("comparison across the step alone: kind %q, undecided %q; want none, saying why", r.Kind, r.Undecided)
	}
}
