package regressions

import (
	"fmt"
	"slices"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/store"
)

// minTailRuns is the fewest timed runs each side of a tail comparison
// needs: a p99 of fewer than 100 runs is its slowest run or two.
const minTailRuns = 1000

// tail compares the p99 of the identity's latency windows of the old tag
// in [w.BeforeFrom, w.BeforeTo) with those of the new tag in
// [w.AfterFrom, w.AfterTo], or nil where either side has too few runs
// timed.
func tail(db *store.DB, identity, oldTag, newTag string, w api.Windows) (*api.TailComparison, error) {
	recs, err := db.Programs()
	if err != nil {
		return nil, err
	}
	var before, after []store.LatencyWindow
	for _, rec := range recs {
		if rec.Identity != identity {
			continue
		}
		switch rec.Tag {
		case oldTag:
			ws, err := db.LatencySeries(rec.Key, w.BeforeFrom, w.BeforeTo.Add(-time.Millisecond))
			if err != nil {
				return nil, err
			}
			before = append(before, ws...)
		case newTag:
			ws, err := db.LatencySeries(rec.Key, w.AfterFrom, w.AfterTo)
			if err != nil {
				return nil, err
			}
			after = append(after, ws...)
		}
	}
	tc := &api.TailComparison{WindowsBefore: len(before), WindowsAfter: len(after)}
	tc.BeforeP99Ns, tc.RunsBefore = p99Of(before)
	tc.AfterP99Ns, tc.RunsAfter = p99Of(after)
	if tc.RunsBefore < minTailRuns || tc.RunsAfter < minTailRuns || tc.BeforeP99Ns <= 0 {
		return nil, nil
	}
	tc.Ratio = tc.AfterP99Ns / tc.BeforeP99Ns
	return tc, nil
}

// p99Of is the median of the windows' p99 (of an even count, the mean of
// the middle two) and the runs they timed. A median, not a mean: one
// window in a disturbed second (a freshly loaded program's first, under
// emulation) must not decide.
func p99Of(ws []store.LatencyWindow) (float64, uint64) {
	var p99s []float64
	var runs uint64
	for _, w := range ws {
		if w.Timed > 0 {
			p99s = append(p99s, float64(w.Quantiles[2]))
			runs += w.Timed
		}
	}
	if len(p99s) == 0 {
		return 0, 0
	}
	slices.Sort(p99s)
	n := len(p99s)
	if n%2 == 0 {
		return (p99s[n/2-1] + p99s[n/2]) / 2, runs
	}
	return p99s[n/2], runs
}

// byTail decides a finding the mean left undecided or unchanged from its
// tail: a p99 that moved by --regressions.min-change or more either way.
func byTail(kind string, tc *api.TailComparison, minChange float64) (newKind, by string) {
	switch {
	case kind != "":
		return kind, "mean"
	case tc == nil:
		return "", ""
	case tc.Ratio >= 1+minChange:
		return "regression", "p99"
	case tc.Ratio <= 1/(1+minChange):
		return "improvement", "p99"
	}
	return "", ""
}

// tailText says what the tail comparison found, for the log.
func tailText(tc *api.TailComparison) string {
	if tc == nil {
		return "no latency windows on both sides"
	}
	return fmt.Sprintf("p99 x%.2f (%.0f -> %.0f ns, %d+%d windows)", tc.Ratio, tc.BeforeP99Ns, tc.AfterP99Ns, tc.WindowsBefore, tc.WindowsAfter)
}
