package regress

import (
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
// test, the minimum change, the other keys' drift divided out). A
// significant change is a shift finding, dated at the windows' border;
// the next comparison then starts after it, so one change is one finding.

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
	open        []Sample // the bucket filling now
	buckets     []Sample // closed buckets, oldest first: the median of each
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
		sh.buckets = append(sh.buckets, Sample{At: sh.open[len(sh.open)-1].At, NsPerRun: median(ns), RunsPerSec: median(load)})
		sh.open = sh.open[:0]
		// Keep two windows: what a comparison reads, here and as a control.
		from := s.At.Add(-2 * t.cfg.ShiftWindow)
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
	if t.cfg.ShiftWindow <= 0 || st.change != nil || now.Sub(sh.lastCheck) < t.cfg.ShiftWindow/2 {
		return nil
	}
	w := t.shiftWindows(now)
	if w.BeforeFrom.Before(sh.steadySince) || w.BeforeFrom.Before(sh.floor) {
		return nil
	}
	sh.lastCheck = now
	if t.compareShift(key, sh, w).Kind == "" {
		return nil
	}
	// Something moved. Date it, and once a whole window has run past
	// that date, measure it with a window on each side of it (a step
	// caught early sits inside the after window, and would read small).
	before, after := split(sh.buckets, w)
	c := changePoint(append(before, after...), t.cfg.MinSamples, w.Changed)
	if now.Before(c.Add(t.cfg.ShiftWindow)) {
		return nil // asked again at the next check
	}
	at := api.Windows{Changed: c, BeforeFrom: c.Add(-t.cfg.ShiftWindow), BeforeTo: c, AfterFrom: c, AfterTo: c.Add(t.cfg.ShiftWindow)}
	r := t.compareShift(key, sh, at)
	if r.Kind == "" {
		return nil
	}
	r.Kind = KindShift
	sh.floor = c // what follows is the new level
	return &Finding{Key: key, OldTag: st.tag, NewTag: st.tag, Windows: at, Result: r}
}

// compareShift compares the buckets of w's two windows, the other keys'
// drift divided out.
func (t *Tracker) compareShift(key string, sh *shiftState, w api.Windows) Result {
	before, after := split(sh.buckets, w)
	drift, controls := t.shiftDrift(key, w)
	if drift != 1 {
		for i := range after {
			after[i].NsPerRun /= drift
		}
	}
	r := Compare(before, after, t.cfg)
	r.Drift, r.Controls = drift, controls
	return r
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

// shiftDrift is drift over the shift windows, from the other keys'
// buckets.
func (t *Tracker) shiftDrift(self string, w api.Windows) (float64, int) {
	return t.controlDrift(self, func(st *keyState) (before, after []float64, ok bool) {
		if st.shift.steadySince.After(w.BeforeFrom) {
			return nil, nil, false
		}
		b, a := split(st.shift.buckets, w)
		return nsOf(b), nsOf(a), true
	})
}

func nsOf(s []Sample) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = x.NsPerRun
	}
	return out
}
