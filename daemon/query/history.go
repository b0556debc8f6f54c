package query

import (
	"fmt"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/store"
)

// History stitches the stored series of every instance PROG names, oldest
// first. With step > 0 it keeps the last sample of each step-long bucket.
// Rates are between consecutive kept points of the same instance.
func (q *Query) History(ref string, since, until time.Time, step time.Duration) (api.History, error) {
	if !until.After(since) {
		return api.History{}, fmt.Errorf("%w: until (%s) must be after since (%s)", errs.BadRequest, until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	if step > 0 && until.Sub(since)/step > maxPoints {
		return api.History{}, fmt.Errorf("%w: step %v over %v gives more than %d points", errs.BadRequest, step, until.Sub(since), maxPoints)
	}
	insts, err := q.Resolve(ref)
	if err != nil {
		return api.History{}, err
	}
	// History is a program's across its reloads: its identity's.
	if insts, err = q.SameProgram(insts); err != nil {
		return api.History{}, err
	}
	if overlap(insts) {
		return api.History{}, ambiguous(ref, insts)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].Rec.FirstSeen.Before(insts[j].Rec.FirstSeen) })
	h := api.History{Program: ref, Since: since, Until: until, StepMs: step.Milliseconds(), Points: []api.HistoryPoint{}}
	spans, err := q.estimatedSpans(since, until)
	if err != nil {
		return api.History{}, err
	}
	for n, inst := range insts {
		points, res, err := q.points(inst.Rec.Key, since, until, step)
		if err != nil {
			return api.History{}, err
		}
		h.Resolution = res.String()
		points = downsample(points, since, step)
		if len(h.Points)+len(points) > maxPoints {
			return api.History{}, fmt.Errorf("%w: more than %d points; use a larger --step or a shorter range", errs.BadRequest, maxPoints)
		}
		for i, p := range points {
			hp := api.HistoryPoint{Time: p.Time, ID: inst.Rec.ID, Counters: PointCounters(p), Estimated: estimated(p.Time, spans), Carried: p.Carried}
			if i > 0 {
				prev := h.Points[len(h.Points)-1]
				hp.Rates = api.RatesBetween(prev.Counters, hp.Counters, hp.Time.Sub(prev.Time))
			} else if n > 0 {
				hp.Reload = true
			}
			h.Points = append(h.Points, hp)
		}
	}
	return h, nil
}

// points reads an instance's samples from the coarsest resolution that
// still gives one point per step: raw below a minute, minute rollups below an
// hour, hour rollups above. Rollups give each bucket's last sample; the
// bucket still filling comes from the raw samples.
func (q *Query) points(k store.InstanceKey, since, until time.Time, step time.Duration) ([]store.Point, store.Resolution, error) {
	res := store.Raw
	switch {
	case step >= time.Hour:
		res = store.Hour
	case step >= time.Minute:
		res = store.Minute
	}
	if res == store.Raw {
		p, err := q.Store.Series(k, since, until)
		return p, res, err
	}
	rolled, err := q.Store.RolledUpTo(res)
	if err != nil {
		return nil, res, err
	}
	rollups, err := q.Store.Rollups(k, res, since.Add(-time.Duration(res)), until)
	if err != nil {
		return nil, res, err
	}
	var out []store.Point
	for _, r := range rollups {
		if !r.Last.Time.Before(since) && !r.Last.Time.After(until) {
			out = append(out, r.Last)
		}
	}
	if rolled.Before(until) {
		recent, err := q.Store.Series(k, maxTime(since, rolled), until)
		if err != nil {
			return nil, res, err
		}
		out = append(out, recent...)
	}
	return out, res, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// downsample keeps the last point of each step-long bucket counted from
// since. Counters are cumulative, so dropping points loses no runs.
func downsample(points []store.Point, since time.Time, step time.Duration) []store.Point {
	if step <= 0 || len(points) == 0 {
		return points
	}
	out := points[:0:0]
	bucket := func(t time.Time) int64 { return int64(t.Sub(since) / step) }
	for i, p := range points {
		if i+1 == len(points) || bucket(points[i+1].Time) != bucket(p.Time) {
			out = append(out, p)
		}
	}
	return out
}
