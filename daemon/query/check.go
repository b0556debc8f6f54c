package query

import (
	"errors"
	"fmt"
	"iter"
	"sort"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/regressions"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/store"
)

// Check answers whether the current version of the program name names is
// slower than the baseline by more than limit (a fraction), over the
// intervals stored in [since, until]. The baseline is a tag (its
// intervals in the range), a time (every interval before it, against the
// current version's after it), or by default ("") the version before the
// current one.
func (q *Query) Check(name, baseline string, limit float64, since, until time.Time) (api.Check, error) {
	res := api.Check{Program: name, Limit: limit, Baseline: baseline}
	insts, err := q.versionsOf(name)
	if err != nil {
		return res, err
	}
	res.Current = insts[len(insts)-1].Tag
	isBefore, isAfter, err := q.checkSides(&res, insts)
	if err != nil {
		return res, err
	}
	var before, after []regress.Sample
	for _, p := range insts {
		pts, err := q.Store.Series(p.Key, since, until)
		if err != nil {
			return res, err
		}
		for _, s := range intervals(pts) {
			switch {
			case isAfter(p, s.At):
				after = append(after, s)
			case isBefore(p, s.At):
				before = append(before, s)
			}
		}
	}
	if len(before) == 0 || len(after) == 0 {
		side := "baseline"
		if len(after) == 0 {
			side = "current version"
		}
		return res, fmt.Errorf("%w: the %s of %s has no runs between %s and %s", errs.NoData, side, name, since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	cfg := q.Regressions
	if err := regressions.Validate(&cfg); err != nil || cfg.Alpha == 0 {
		cfg = regress.DefaultConfig()
	}
	cfg.MinChange = limit
	// As the detector does: each interval divided by how slow the
	// machine ran then, told by programs whose version did not change.
	drift, controls := regress.DivideDrift(before, after, q.checkControls(insts, before, after, cfg.MinSamples), spacing(before, after))
	c := regress.Compare(before, after, cfg)
	res.Comparison = c.Comparison
	res.Drift, res.Controls = drift, controls
	switch {
	case c.Undecided != "":
		res.Verdict = api.VerdictUndecided
	case c.Kind == regress.KindRegression:
		res.Verdict = api.VerdictSlower
	default:
		res.Verdict = api.VerdictOK
	}
	return res, nil
}

// versionsOf is every stored instance of the one program name names,
// across its versions (one identity, never several programs that share a
// name), oldest first.
func (q *Query) versionsOf(name string) ([]store.Program, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: name a program", errs.BadRequest)
	}
	found, err := q.Resolve(name)
	if errors.Is(err, errs.UnknownProgram) {
		return nil, fmt.Errorf("%w: no program named %q was ever seen", errs.UnknownProgram, name)
	}
	if err != nil {
		return nil, err
	}
	if found, err = q.SameProgram(found); err != nil {
		return nil, err
	}
	if keys := identityKeys(found); len(keys) > 1 {
		return nil, fmt.Errorf("%w %q: it names %d programs (identities %s); name one by its identity", errs.AmbiguousProgram, name, len(keys), strings.Join(keys, ", "))
	}
	var insts []store.Program
	for _, in := range found {
		insts = append(insts, in.Rec)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].FirstSeen.Before(insts[j].FirstSeen) })
	return insts, nil
}

// checkSides says which instances and times make each side of the check:
// the baseline (res.Baseline: a tag, a time, or by default the version
// before res.Current, which it then names) and the current version.
func (q *Query) checkSides(res *api.Check, insts []store.Program) (isBefore, isAfter func(store.Program, time.Time) bool, err error) {
	name, baseline, current := res.Program, res.Baseline, res.Current
	at, terr := api.ParseTime(baseline, q.Now())
	switch {
	case baseline == "":
		prev := ""
		for _, p := range insts {
			if p.Tag != current {
				prev = p.Tag
			}
		}
		if prev == "" {
			return nil, nil, fmt.Errorf("%w: %s has one version (%s) only: name a --baseline tag or time", errs.BadRequest, name, current)
		}
		res.Baseline = prev
		isBefore = func(p store.Program, _ time.Time) bool { return p.Tag == prev }
		isAfter = func(p store.Program, _ time.Time) bool { return p.Tag == current }
	case terr == nil:
		isBefore = func(_ store.Program, t time.Time) bool { return t.Before(at) }
		isAfter = func(p store.Program, t time.Time) bool { return p.Tag == current && !t.Before(at) }
	default:
		if !hasTag(insts, baseline) {
			return nil, nil, fmt.Errorf("%w: baseline %q is neither a time nor a tag %s ever ran with", errs.BadRequest, baseline, name)
		}
		if baseline == current {
			return nil, nil, fmt.Errorf("%w: baseline %s is the current version of %s", errs.BadRequest, baseline, name)
		}
		isBefore = func(p store.Program, _ time.Time) bool { return p.Tag == baseline }
		isAfter = func(p store.Program, _ time.Time) bool { return p.Tag == current }
	}
	return isBefore, isAfter, nil
}

func hasTag(insts []store.Program, tag string) bool {
	for _, p := range insts {
		if p.Tag == tag {
			return true
		}
	}
	return false
}

// checkControls yields, in the store's order, the intervals of each other
// program that ran one version (a stored instance is one) across both
// sides of a check, split at the sides' times: before up to the last
// baseline interval, after from the first current one, with minSamples
// intervals at least on each. The caller stops at regress.MaxControls.
func (q *Query) checkControls(insts []store.Program, before, after []regress.Sample, minSamples int) iter.Seq2[[]regress.Sample, []regress.Sample] {
	return func(yield func(before, after []regress.Sample) bool) {
		from, beforeTo := timeSpan(before)
		afterFrom, to := timeSpan(after)
		progs, err := q.Store.Programs()
		if err != nil {
			return // no controls: the ratio is left as it is, and says so
		}
		self := map[string]bool{}
		for _, p := range insts {
			self[p.Identity] = true
		}
		for _, p := range progs {
			if p.Identity == "" || self[p.Identity] || p.FirstSeen.After(beforeTo) || (!p.Loaded() && p.UnloadedAt.Before(afterFrom)) {
				continue
			}
			// Each side's range only: a baseline tag of long ago leaves
			// months between them. The after side loses its first
			// interval (it ends past afterFrom, from a point before).
			b, ok := q.controlSide(p.Key, from, beforeTo, minSamples)
			if !ok {
				continue
			}
			a, ok := q.controlSide(p.Key, afterFrom, to, minSamples)
			if !ok {
				continue
			}
			if !yield(b, a) {
				return
			}
		}
	}
}

// controlSide is a control's intervals in [from, to]; ok is false when
// they cannot be read or are fewer than minSamples (at least one).
func (q *Query) controlSide(key store.InstanceKey, from, to time.Time, minSamples int) (side []regress.Sample, ok bool) {
	pts, err := q.Store.Series(key, from, to)
	if err != nil {
		return nil, false
	}
	side = intervals(pts)
	return side, len(side) >= max(minSamples, 1)
}

// timeSpan is the first and last time of samples.
func timeSpan(samples []regress.Sample) (first, last time.Time) {
	for i, s := range samples {
		if i == 0 || s.At.Before(first) {
			first = s.At
		}
		if i == 0 || s.At.After(last) {
			last = s.At
		}
	}
	return first, last
}

// spacing is how near in time a control's interval must be to pair with
// one of the program's: the median gap between the program's consecutive
// intervals on either side (the store's resolution where it was read:
// a tick, or a rollup's bucket), a second where there is none.
func spacing(before, after []regress.Sample) time.Duration {
	var gaps []float64
	for _, side := range [][]regress.Sample{before, after} {
		for i := 1; i < len(side); i++ {
			if d := side[i].At.Sub(side[i-1].At); d > 0 {
				gaps = append(gaps, float64(d))
			}
		}
	}
	if len(gaps) == 0 {
		return time.Second
	}
	return time.Duration(regress.Median(gaps))
}

// intervals turns stored cumulative points into per-interval samples,
// leaving out intervals with too few runs to say anything and carried
// ones (store.Sample.Carried).
func intervals(pts []store.Point) []regress.Sample {
	var out []regress.Sample
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if b.Carried {
			// Stats were off all through it: it repeats the last on
			// part's figures. Counted, a 1% duty would count each part
			// ten times and make the test ten times surer than its
			// measurements allow (the live detector skips them too).
			continue
		}
		if smp, ok := regressions.IntervalSample(b.Time, PointCounters(a), PointCounters(b), b.Time.Sub(a.Time)); ok {
			out = append(out, smp)
		}
	}
	return out
}
