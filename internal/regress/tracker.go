package regress

import (
	"iter"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// Finding is a decided comparison between two versions of one program key.
type Finding struct {
	Key    string `json:"key"`
	OldTag string `json:"old_tag"`
	NewTag string `json:"new_tag"`
	api.Windows
	Result
}

// tagged is a sample with the version it was taken from.
type tagged struct {
	Sample
	tag string
}

// pending is a change of version waiting for its after window to fill.
type pending struct {
	at             time.Time
	oldTag, newTag string
}

type keyState struct {
	tag     string
	samples []tagged // oldest first, pruned to what a decision can need
	change  *pending
	shift   shiftState // same-version drift (shift.go)
}

// Tracker follows program keys across versions: fed one sample per
// interval per key, it returns a finding once a new version has run for a
// window. The same tag again never starts a comparison. It is not safe for
// concurrent use.
type Tracker struct {
	cfg  Config
	keys map[string]*keyState
	// sorted is keys' names in order, for the controls a decision reads;
	// nil when a key came or went since it was made.
	sorted []string
}

// NewTracker returns a tracker deciding with cfg.
func NewTracker(cfg Config) *Tracker { return &Tracker{cfg: cfg, keys: map[string]*keyState{}} }

// Seen records that key runs tag now without a sample (a program that was
// idle this interval), so a reload is noticed when it happens.
func (t *Tracker) Seen(key, tag string, now time.Time) { t.state(key, tag, now) }

// Observe adds one interval's sample of key running tag. It returns the
// finding, decided or not (Kind empty and Undecided set), when a change of
// version has now run for a window; nil otherwise.
func (t *Tracker) Observe(key, tag string, s Sample) *Finding {
	st := t.state(key, tag, s.At)
	st.samples = append(st.samples, tagged{s, tag})
	t.prune(st, s.At)
	if t.cfg.ShiftWindow > 0 {
		t.addShiftSample(&st.shift, s)
	}
	c := st.change
	if c == nil {
		return t.checkShift(key, st, s.At)
	}
	if s.At.Sub(c.at) < t.cfg.Window {
		return nil
	}
	st.change = nil
	f := &Finding{Key: key, OldTag: c.oldTag, NewTag: c.newTag, Windows: api.Windows{
		Changed: c.at, BeforeFrom: c.at.Add(-t.cfg.Window), BeforeTo: c.at, AfterFrom: c.at, AfterTo: s.At}}
	var before, after []Sample
	for _, x := range st.samples {
		switch {
		case x.tag == c.oldTag && !x.At.Before(f.BeforeFrom) && x.At.Before(c.at):
			before = append(before, x.Sample)
		case x.tag == c.newTag && !x.At.Before(c.at):
			after = append(after, x.Sample)
		}
	}
	drift, controls := t.divideDrift(key, f.Windows, before, after)
	f.Result = Compare(before, after, t.cfg)
	f.Drift, f.Controls = drift, controls
	return f
}

// MaxControls bounds the programs a decision reads to tell the machine's
// drift.
const MaxControls = 32

// divideDrift divides each of the program's intervals, on both sides of
// the reload, by how slow the machine ran at that moment (DivideDrift):
// the controls are the other keys that ran one version across both of
// w's windows (at most MaxControls, in key order), read within a tenth
// of the window.
func (t *Tracker) divideDrift(self string, w api.Windows, before, after []Sample) (float64, int) {
	return DivideDrift(before, after, t.controls(self, func(st *keyState) (before, after []Sample, ok bool) {
		for _, x := range st.samples {
			if x.At.Before(w.BeforeFrom) || x.At.After(w.AfterTo) {
				continue
			}
			if x.tag != st.tag {
				return nil, nil, false
			}
			if x.At.Before(w.Changed) {
				before = append(before, x.Sample)
			} else {
				after = append(after, x.Sample)
			}
		}
		return before, after, true
	}), t.cfg.Window/10)
}

// DivideDrift divides each interval of before and after, in place, by how
// slow the machine ran at that moment: the median, over the controls
// (programs whose version did not change across both sides; at most
// MaxControls), of their ns/run in the same interval (the nearest, within
// within) over their own median across both sides. A host whose speed
// steps inside a window (a neighbour's job starting, a CPU's clock) is
// then taken out where it happened; one ratio over the two windows, as
// the detector did until 2026-11-27, divides a step by half its height
// and leaves the rest to the program. The same interval, not a median of
// several around it: the host's disturbances within an interval reach the
// program and its neighbours alike, so pairing them cancels those too
// (BenchmarkDetectorReplay's busy host beside a copy, stats on all the
// time: no false finding and every +15% found, against 12-29% and 53-66%
// with one ratio; medians of 3 to 31 neighbouring intervals did worse at
// every duty).
// It returns the machine's after/before ratio and how many controls told
// it: 1 and 0 when none qualifies, and the intervals are left as they are.
func DivideDrift(before, after []Sample, controls iter.Seq2[[]Sample, []Sample], within time.Duration) (float64, int) {
	points := append(append([]Sample(nil), before...), after...)
	speed, n := speedAt(controls, points, within)
	if n == 0 {
		return 1, 0
	}
	for i := range before {
		before[i].NsPerRun /= speed[i]
	}
	for i := range after {
		after[i].NsPerRun /= speed[len(before)+i]
	}
	return Median(speed[len(before):]) / Median(speed[:len(before)]), n
}

// controls yields, in key order, the two sides (as sides reads them) of
// each other key with no pending change whose sides hold MinSamples each:
// the keys a decision may read the machine's drift from. The caller
// stops at MaxControls.
func (t *Tracker) controls(self string, sides func(*keyState) (before, after []Sample, ok bool)) iter.Seq2[[]Sample, []Sample] {
	return func(yield func(before, after []Sample) bool) {
		for _, k := range t.keyOrder() {
			if k == self {
				continue
			}
			st := t.keys[k]
			if st.change != nil {
				continue
			}
			before, after, ok := sides(st)
			if !ok || len(before) < t.cfg.MinSamples || len(after) < t.cfg.MinSamples {
				continue
			}
			if !yield(before, after) {
				return
			}
		}
	}
}

// keyOrder is every key's name, sorted: controls are taken in key order so
// a decision does not depend on map order.
func (t *Tracker) keyOrder() []string {
	if t.sorted == nil {
		t.sorted = make([]string, 0, len(t.keys))
		for k := range t.keys {
			t.sorted = append(t.sorted, k)
		}
		sort.Strings(t.sorted)
	}
	return t.sorted
}

// Forget drops keys not seen since before: programs gone for good.
func (t *Tracker) Forget(before time.Time) {
	for k, st := range t.keys {
		if n := len(st.samples); st.change == nil && (n == 0 || st.samples[n-1].At.Before(before)) {
			delete(t.keys, k)
			t.sorted = nil
		}
	}
}

// Keys is how many program keys are followed.
func (t *Tracker) Keys() int { return len(t.keys) }

func (t *Tracker) state(key, tag string, now time.Time) *keyState {
	st := t.keys[key]
	if st == nil {
		st = &keyState{tag: tag, shift: shiftState{steadySince: now}}
		t.keys[key] = st
		t.sorted = nil
	}
	if st.tag != tag {
		// A second reload before the first was decided leaves the first
		// without an after window: compare the newest change only.
		st.change = &pending{at: now, oldTag: st.tag, newTag: tag}
		st.tag = tag
		st.shift = shiftState{steadySince: now}
	}
	return st
}

// prune keeps the samples a decision can still need: a window before the
// pending change, or two windows back from now (another key's decision
// reads both its windows here to tell the machine's drift).
func (t *Tracker) prune(st *keyState, now time.Time) {
	from := now.Add(-2 * t.cfg.Window)
	if st.change != nil {
		from = st.change.at.Add(-t.cfg.Window)
	}
	i := 0
	for i < len(st.samples) && st.samples[i].At.Before(from) {
		i++
	}
	if i > 0 {
		st.samples = append(st.samples[:0], st.samples[i:]...)
	}
}
