// Package evict makes room in the daemon's bounded maps (loads not yet
// taken, pods looked up): when one is full, its oldest quarter goes, so a
// burst past the bound pays one sort for many entries rather than one
// scan each.
package evict

import (
	"slices"
	"time"
)

// OldestQuarter deletes the quarter of m's entries (at least one) that are
// oldest by at.
func OldestQuarter[K comparable, V any](m map[K]V, at func(V) time.Time) {
	type aged struct {
		k  K
		at time.Time
	}
	all := make([]aged, 0, len(m))
	for k, v := range m {
		all = append(all, aged{k, at(v)})
	}
	slices.SortFunc(all, func(a, b aged) int { return a.at.Compare(b.at) })
	for _, a := range all[:max(1, len(all)/4)] {
		delete(m, a.k)
	}
}
