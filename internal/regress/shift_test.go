package regress

import (
	"math/rand/v2"
	"testing"
	"time"
)

// One version whose ns/run steps up 50% after two windows is one shift,
// dated within a few samples of the step, with its ratio; steady noise and the hour after the step are none; a reload
// starts its series anew.
func TestShift(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShiftWindow = time.Minute // buckets of one second: a sample each
	rng := rand.New(rand.NewPCG(9, 10))
	tr := NewTracker(cfg)
	var found []*Finding
	feed := func(tag string, from time.Time, n int, ns float64) {
		for _, s := range noisy(rng, from, n, ns, 0.05, 500) {
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
