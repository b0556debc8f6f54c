package regress

import (
	"iter"
	"math"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// Same-version drift: a program whose code did not change can still get
// slower (the kernel, a map that grew, a neighbour on its cache). Each key
// keeps its samples folded into buckets (bucketsPerSide to a shift
// window, so months of one-second ticks cost a bounded 2 × 60 points), and
// every half shift window the tracker compares the last window with the
// one before it with the same test as a reload (matched load, the rank
// test, the minimum change), each point divided by the machine's speed
// at its time as the other keys felt it (machineSpeed). A significant
// change is dated where the series best splits in two (changePoint),
// measured again with a window each side of that date, and is a shift
// finding; the next comparison then starts after it, so one change is
// one finding. With no other key to read the machine's speed from, no
// shift is claimed.

// bucketsPerSide is how many points one shift window holds.
const bucketsPerSide = 60

// DefaultShiftWindow is --regressions.shift-window: each side of a
// same-version comparison.
const DefaultShiftWindow = time.Hour

// shiftState is a key's bucketed history for shift detection.
type shiftState struct {
	steadySince time.Time // the tag runs since
	floor       time.Time // no comparison reaches before this (the last shift)
	lastCheck   time.Time
	candidate   time.Time // a change dated here waits for a window after it
	open        []Sample  // the bucket filling now
	buckets     []Sample  // closed buckets, oldest first: the median of each
}

func (t *Tracker) bucketLen() time.Duration { return t.cfg.ShiftWindow / bucketsPerSide }

// addShiftSample folds s into the key's open bucket and closes it when it
// spans a bucket.
func (t *Tracker) addShiftSample(sh *shiftState, s Sample) {
	if len(sh.open) > 0 && s.At.Sub(sh.open[0].At) >= t.bucketLen() {
		ns, load := make([]float64, len(sh.open)), make([]float64, len(sh.open))
		for i, x := range sh.open {
			ns[i], load[i] = x.NsPerRun, x.RunsPerSec
		}
		sh.buckets = append(sh.buckets, Sample{At: sh.open[len(sh.open)-1].At, NsPerRun: Median(ns), RunsPerSec: Median(load)})
		sh.open = sh.open[:0]
		// Keep two windows and a bucket: what a comparison reads, here
		// and as a control, a tick or two after it was due.
		from := s.At.Add(-2*t.cfg.ShiftWindow - t.bucketLen())
		i := sort.Search(len(sh.buckets), func(i int) bool { return !sh.buckets[i].At.Before(from) })
		sh.buckets = append(sh.buckets[:0], sh.buckets[i:]...)
	}
	sh.open = append(sh.open, s)
}

// shiftWindows are the two windows a comparison at now reads.
func (t *Tracker) shiftWindows(now time.Time) api.Windows {
	w := t.cfg.ShiftWindow
	return api.Windows{Changed: now.Add(-w), BeforeFrom: now.Add(-2 * w), BeforeTo: now.Add(-w), AfterFrom: now.Add(-w), AfterTo: now}
}

// checkShift compares key's last shift window with the one before, every
// half window, once the key has run one version for both.
func (t *Tracker) checkShift(key string, st *keyState, now time.Time) *Finding {
	sh := &st.shift
	if t.cfg.ShiftWindow <= 0 || st.change != nil {
		return nil
	}
	if !sh.candidate.IsZero() {
		if now.Before(sh.candidate.Add(t.cfg.ShiftWindow)) {
			return nil
		}
		c := sh.candidate
		sh.candidate = time.Time{}
		return t.measureShift(key, st, c)
	}
	if now.Sub(sh.lastCheck) < t.cfg.ShiftWindow/2 {
		return nil
	}
	w := t.shiftWindows(now)
	if w.BeforeFrom.Before(sh.steadySince) || w.BeforeFrom.Before(sh.floor) {
		return nil
	}
	sh.lastCheck = now
	r, points := t.compareShift(key, sh, w)
	if r.Kind == "" {
		return nil
	}
	// Something moved. Date it, on the points with the machine's drift
	// divided out (else a neighbour's step could date it), and once a
	// whole window has run past that date, measure it with a window on
	// each side of it (a step caught early sits inside the after window,
	// and would read small). Until then the date is kept: the regular
	// comparisons that follow straddle the step and may not see it whole.
	c := changePoint(points, t.cfg.MinSamples, w.Changed)
	if now.Before(c.Add(t.cfg.ShiftWindow)) {
		sh.candidate = c
		return nil
	}
	return t.measureShift(key, st, c)
}

// measureShift compares a window each side of c, the date a comparison
// gave a change; a significant one is a shift finding, and the next
// comparison starts after it.
func (t *Tracker) measureShift(key string, st *keyState, c time.Time) *Finding {
	sh := &st.shift
	at := api.Windows{Changed: c, BeforeFrom: c.Add(-t.cfg.ShiftWindow), BeforeTo: c, AfterFrom: c, AfterTo: c.Add(t.cfg.ShiftWindow)}
	r, _ := t.compareShift(key, sh, at)
	if r.Kind == "" {
		return nil
	}
	r.Kind = KindShift
	sh.floor = c // what follows is the new level
	return &Finding{Key: key, OldTag: st.tag, NewTag: st.tag, Windows: at, Result: r}
}

// compareShift compares the buckets of w's two windows, each divided by
// the machine's speed at its time (machineSpeed), and returns the
// comparison and the points it compared, oldest first.
func (t *Tracker) compareShift(key string, sh *shiftState, w api.Windows) (Result, []Sample) {
	before, after := split(sh.buckets, w)
	points := append(before, after...)
	speed, controls := t.machineSpeed(key, points, w)
	for i := range points {
		points[i].NsPerRun /= speed[i]
	}
	before, after = points[:len(before)], points[len(before):]
	r := Compare(before, after, t.cfg)
	if controls == 0 {
		// One program's level alone moves with the machine's: on a
		// shared VM its 5-minute medians differed by more than 10% in
		// two trials of three (BenchmarkShiftReplay). Without a
		// neighbour to tell the two apart, a shift is not claimed.
		r.Kind, r.Significant = "", false
		r.Undecided = "no other program ran one version across both windows to tell the machine's drift from the program's"
		return r, points
	}
	r.Controls = controls
	r.Drift = Median(speed[len(before):]) / Median(speed[:len(before)])
	return r, points
}

// machineSpeed is, for each point, how slow the machine ran then: the
// median, over the other keys that ran one version across both of w's
// windows (at most MaxControls, in key order), of their bucket nearest in
// time to the point over their own median across the windows. Dividing a
// program's point by it takes out what its neighbours felt too (the
// machine's other tenants, its clock) point by point, so a slow drift of
// the machine neither dates nor makes a shift. All 1 when no key
// qualifies.
func (t *Tracker) machineSpeed(self string, points []Sample, w api.Windows) ([]float64, int) {
	return speedAt(t.controls(self, func(st *keyState) (before, after []Sample, ok bool) {
		if st.shift.steadySince.After(w.BeforeFrom) {
			return nil, nil, false
		}
		before, after = split(st.shift.buckets, w)
		return before, after, true
	}), points, t.bucketLen())
}

// speedAt is, for each point, the median over the controls (at most
// MaxControls) of their sample nearest in time to it, within within, over
// the control's own median across both sides: how slow the machine ran
// then. 1 where no control has a sample near; all 1 with no control. It
// also returns how many controls told it.
func speedAt(controls iter.Seq2[[]Sample, []Sample], points []Sample, within time.Duration) ([]float64, int) {
	var rel [][]float64 // per control, per point
	for before, after := range controls {
		ctl := append(before, after...)
		m := Median(nsOf(ctl))
		if m <= 0 {
			continue
		}
		r := make([]float64, len(points))
		for i, p := range points {
			r[i] = nearest(ctl, p.At, within).NsPerRun / m
		}
		rel = append(rel, r)
		if len(rel) == MaxControls {
			break
		}
	}
	speed := make([]float64, len(points))
	col := make([]float64, 0, len(rel))
	for i := range points {
		col = col[:0]
		for _, r := range rel {
			if r[i] > 0 {
				col = append(col, r[i])
			}
		}
		speed[i] = 1
		if len(col) > 0 {
			speed[i] = Median(col)
		}
	}
	return speed, len(rel)
}

// nearest is the bucket of buckets (oldest first) closest in time to at,
// or a zero Sample when none is within within of it.
func nearest(buckets []Sample, at time.Time, within time.Duration) Sample {
	i := sort.Search(len(buckets), func(i int) bool { return !buckets[i].At.Before(at) })
	best, gap := Sample{}, within+1
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(buckets) {
			continue
		}
		d := buckets[j].At.Sub(at)
		if d < 0 {
			d = -d
		}
		if d < gap {
			best, gap = buckets[j], d
		}
	}
	return best
}

// changePoint is where the series most likely stepped: the split (each
// side at least min points) that maximizes the difference of the two
// sides' means weighted by sqrt(left × right / n), the CUSUM statistic of
// one change in mean. def when the series is too short.
func changePoint(series []Sample, min int, def time.Time) time.Time {
	n := len(series)
	if n < 2*min || min < 1 {
		return def
	}
	prefix := make([]float64, n+1)
	for i, x := range series {
		prefix[i+1] = prefix[i] + x.NsPerRun
	}
	best, at := -1.0, def
	for k := min; k <= n-min; k++ {
		left, right := prefix[k]/float64(k), (prefix[n]-prefix[k])/float64(n-k)
		score := math.Abs(right-left) * math.Sqrt(float64(k)*float64(n-k)/float64(n))
		if score > best {
			best, at = score, series[k].At
		}
	}
	return at
}

// split returns the copies of buckets in w's before and after windows.
func split(buckets []Sample, w api.Windows) (before, after []Sample) {
	for _, b := range buckets {
		switch {
		case !b.At.Before(w.BeforeFrom) && b.At.Before(w.BeforeTo):
			before = append(before, b)
		case !b.At.Before(w.AfterFrom) && !b.At.After(w.AfterTo):
			after = append(after, b)
		}
	}
	return before, after
}

func nsOf(s []Sample) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = x.NsPerRun
	}
	return out
}
