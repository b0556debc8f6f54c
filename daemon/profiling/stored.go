package profiling

import (
	"fmt"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// mergeBatch is how many profiles a merge reads and parses at once, so
// its memory stays that of the merged profile plus a batch.
const mergeBatch = 32

// StoredProfiles is what reading stored profiles needs of the store.
type StoredProfiles interface {
	ListProfiles(from, to time.Time) ([]store.ProfileInfo, error)
	GetProfile(id string) (store.ProfileInfo, []byte, error)
	ProfileData(infos []store.ProfileInfo) ([][]byte, error)
}

// Stored is the stored profile id, parsed.
func Stored(db StoredProfiles, id string) (*pprof.Profile, error) {
	_, data, err := db.GetProfile(id)
	if err != nil {
		return nil, err
	}
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, fmt.Errorf("stored profile %s: %w", id, err)
	}
	return p, nil
}

// MergeStored merges the stored profiles in list (those between since and
// until), a batch at a time.
func MergeStored(db StoredProfiles, list []store.ProfileInfo, since, until time.Time) (*pprof.Profile, error) {
	if len(list) == 0 {
		return nil, fmt.Errorf("%w between %s and %s", profile.ErrNoProfiles, since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if len(list) > MaxMerge {
		return nil, fmt.Errorf("%w: %d profiles in the range, more than %d: narrow it", errs.BadRequest, len(list), MaxMerge)
	}
	var merged *pprof.Profile
	for batch := range chunks(list, mergeBatch) {
		data, err := db.ProfileData(batch)
		if err != nil {
			return nil, err
		}
		ps := make([]*pprof.Profile, 0, len(batch)+1)
		if merged != nil {
			ps = append(ps, merged)
		}
		for i, b := range data {
			p, err := profile.ParseData(b)
			if err != nil {
				return nil, fmt.Errorf("stored profile %s: %w", batch[i].ID, err)
			}
			ps = append(ps, p)
		}
		if merged, err = profile.Merge(ps...); err != nil {
			return nil, err
		}
	}
	return merged, nil
}

// MergeWindows merges the continuous windows that lie wholly in
// [from, to] (one that straddles a reload would blur the two sides), the
// newest MaxMerge of them, and says how many.
func MergeWindows(db StoredProfiles, from, to time.Time) (*pprof.Profile, int, error) {
	list, err := db.ListProfiles(from, to)
	if err != nil {
		return nil, 0, err
	}
	kept := list[:0]
	for _, p := range list {
		if p.Kind == store.ProfileContinuous && !p.Start.Before(from) && !p.End().After(to) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return nil, 0, fmt.Errorf("%w between %s and %s", profile.ErrNoProfiles, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if len(kept) > MaxMerge {
		kept = kept[len(kept)-MaxMerge:]
	}
	p, err := MergeStored(db, kept, from, to)
	return p, len(kept), err
}

func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}
