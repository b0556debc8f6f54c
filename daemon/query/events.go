package query

import (
	"strconv"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// Events are the stored events between since and until; with ref, only
// one program's: ref is an id, a name or name@tag, or an identity, one
// the store knows (errs.UnknownProgram otherwise, as history), and its
// identity's events (every version's) come with it.
func (q *Query) Events(since, until time.Time, ref string) ([]store.Event, error) {
	var insts []Instance
	if ref != "" {
		var err error
		if insts, err = q.Resolve(ref); err == nil {
			insts, err = q.SameProgram(insts)
		}
		if err != nil {
			return nil, err
		}
	}
	events, err := q.Store.Events(since, until)
	if ref != "" && err == nil {
		name, tag, hasTag := strings.Cut(ref, "@")
		_, idErr := strconv.ParseUint(ref, 10, 32)
		idents, ids := map[string]bool{}, map[uint32]string{}
		for _, in := range insts {
			ids[in.Rec.ID] = in.Rec.Name
			if in.Ident != "" {
				idents[in.Ident] = true
			}
		}
		kept := events[:0]
		for _, e := range events {
			byName := idErr != nil && e.Name == name && (!hasTag || e.Tag == tag)
			byID := e.ID != 0 && ids[e.ID] == e.Name && e.Name != ""
			if byName || byID || (e.Identity != "" && idents[e.Identity]) {
				kept = append(kept, e)
			}
		}
		events = kept
	}
	return NonNil(events), err
}
