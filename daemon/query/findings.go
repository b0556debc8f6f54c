package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/internal/regress"
)

// isFinding says whether an event kind is one of regression detection's.
func isFinding(kind string) bool {
	return kind == regress.KindRegression || kind == regress.KindImprovement || kind == regress.KindShift
}

// Findings returns the stored findings in [since, until], of one program
// name when prog is set: a name the store knows (errs.UnknownProgram
// otherwise, as history), since a name many versions share is what
// findings are about.
func (q *Query) Findings(since, until time.Time, prog string) ([]api.Regression, error) {
	if prog != "" {
		if _, err := q.Resolve(prog); errors.Is(err, errs.UnknownProgram) {
			return nil, err
		}
	}
	events, err := q.Store.Events(since, until)
	if err != nil {
		return nil, err
	}
	out := []api.Regression{}
	for _, e := range events {
		if !isFinding(e.Kind) || (prog != "" && e.Name != prog) || len(e.Evidence) == 0 {
			continue
		}
		var r api.Regression
		if err := json.Unmarshal(e.Evidence, &r); err != nil {
			return nil, fmt.Errorf("stored %s event of %s: %w", e.Kind, e.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Finding is a stored finding by id, over the whole history.
func (q *Query) Finding(id string) (api.Regression, error) {
	list, err := q.Findings(time.Unix(0, 0), q.Now().Add(time.Hour), "")
	if err != nil {
		return api.Regression{}, err
	}
	for _, r := range list {
		if r.ID == id {
			return r, nil
		}
	}
	return api.Regression{}, fmt.Errorf("%w: %q", errs.UnknownRegression, id)
}
