package httpapi

import (
	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/store"
)

// The daemon's domain types become the API's here, at the edge, and
// nowhere else. Where the layers agree there is one definition (api.Meta
// is collectors.Meta, api.Event is store.Event, ...), and nothing to
// convert.

// pointCounters are a stored sample's cumulative counters.
func pointCounters(p store.Point) api.Counters {
	v := p.Values
	return api.Counters{RunTimeNs: v[store.ColRunTimeNs], RunCnt: v[store.ColRunCnt], RecursionMisses: v[store.ColRecursionMisses]}
}

// nonNil is s, or an empty list for none: the API answers [], not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
