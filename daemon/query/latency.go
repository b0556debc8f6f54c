package query

import (
	"fmt"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/latency"
)

// LatencyHistory lists the stored latency windows of every instance PROG
// names, oldest first.
func (q *Query) LatencyHistory(ref string, since, until time.Time) (api.LatencyHistory, error) {
	if !until.After(since) {
		return api.LatencyHistory{}, fmt.Errorf("%w: until (%s) must be after since (%s)", errs.BadRequest, until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	insts, err := q.Resolve(ref)
	if err != nil {
		return api.LatencyHistory{}, err
	}
	h := api.LatencyHistory{Program: ref, Since: since, Until: until, Windows: []api.LatencyWindow{}}
	for _, inst := range insts {
		ws, err := q.Store.LatencySeries(inst.Rec.Key, since, until)
		if err != nil {
			return api.LatencyHistory{}, err
		}
		for _, w := range ws {
			h.Windows = append(h.Windows, latency.View(w, inst.Rec.Name))
		}
		if len(h.Windows) > maxPoints {
			return api.LatencyHistory{}, fmt.Errorf("%w: more than %d windows; use a shorter range", errs.BadRequest, maxPoints)
		}
	}
	sort.SliceStable(h.Windows, func(i, j int) bool { return h.Windows[i].End.Before(h.Windows[j].End) })
	return h, nil
}
