package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// profileRoutes registers the /v1/profiles endpoints. The GETs only read
// the store; the POST starts a bounded capture.
func (s *server) profileRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/profiles", s.listProfiles)
	mux.HandleFunc("GET /v1/profiles/merge", s.mergeProfiles)
	mux.HandleFunc("GET /v1/profiles/{id}", s.getProfile)
	mux.HandleFunc("POST /v1/profiles/capture", s.captureProfile)
}

func writeProfile(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// kindFilter keeps profiles of the kind asked for: continuous, on-demand or
// all (default def).
func kindFilter(r *http.Request, def string) (func(store.ProfileInfo) bool, error) {
	k := r.URL.Query().Get("kind")
	if k == "" {
		k = def
	}
	switch k {
	case "all":
		return func(store.ProfileInfo) bool { return true }, nil
	case store.ProfileContinuous, store.ProfileOnDemand:
		return func(p store.ProfileInfo) bool { return p.Kind == k }, nil
	}
	return nil, fmt.Errorf("%w: kind %q: want continuous, on-demand or all", ErrBadRequest, k)
}

func (s *server) profilesIn(r *http.Request, defKind string) ([]store.ProfileInfo, time.Time, time.Time, error) {
	since, until, err := queryRange(r.URL.Query(), time.Hour, s.d.now()) // default: the last hour
	if err != nil {
		return nil, since, until, err
	}
	keep, err := kindFilter(r, defKind)
	if err != nil {
		return nil, since, until, err
	}
	list, err := s.d.store.ListProfiles(since, until)
	kept := []store.ProfileInfo{}
	for _, p := range list {
		if keep(p) {
			kept = append(kept, p)
		}
	}
	return kept, since, until, err
}

func (s *server) listProfiles(w http.ResponseWriter, r *http.Request) {
	list, _, _, err := s.profilesIn(r, "all")
	if err != nil {
		reply(w, nil, err)
		return
	}
	reply(w, apiProfiles(list), nil)
}

func (s *server) getProfile(w http.ResponseWriter, r *http.Request) {
	info, data, err := s.d.store.GetProfile(r.PathValue("id"))
	if err != nil {
		reply(w, nil, err)
		return
	}
	w.Header().Set(api.HeaderProfileID, info.ID)
	writeProfile(w, data)
}

// mergeProfiles answers the sum of the profiles in a range (continuous
// windows by default: an on-demand capture samples the same time again). It
// reads and merges a batch at a time.
func (s *server) mergeProfiles(w http.ResponseWriter, r *http.Request) {
	list, since, until, err := s.profilesIn(r, store.ProfileContinuous)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if len(list) == 0 {
		reply(w, nil, fmt.Errorf("%w between %s and %s", profile.ErrNoProfiles, since.Format(time.RFC3339), until.Format(time.RFC3339)))
		return
	}
	if len(list) > maxMergeProfiles {
		reply(w, nil, fmt.Errorf("%w: %d profiles in the range, more than %d: narrow it", ErrBadRequest, len(list), maxMergeProfiles))
		return
	}
	merged, err := s.d.mergeStored(list)
	if err != nil {
		reply(w, nil, err)
		return
	}
	data, err := profile.Marshal(merged)
	if err != nil {
		reply(w, nil, err)
		return
	}
	w.Header().Set(api.HeaderProfileCount, strconv.Itoa(len(list)))
	writeProfile(w, data)
}

// mergeStored reads and merges stored profiles a batch at a time.
func (d *Daemon) mergeStored(list []store.ProfileInfo) (*pprof.Profile, error) {
	var merged *pprof.Profile
	for batch := range chunks(list, mergeBatch) {
		data, err := d.store.ProfileData(batch)
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
		var err2 error
		if merged, err2 = profile.Merge(ps...); err2 != nil {
			return nil, err2
		}
	}
	return merged, nil
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

// captureProfile takes an on-demand profile of ?duration, one at a time,
// stores it and answers it. If the client goes away the capture stops and
// nothing is stored.
func (s *server) captureProfile(w http.ResponseWriter, r *http.Request) {
	prof, err := s.d.profiler()
	if err != nil {
		reply(w, nil, err)
		return
	}
	v := r.URL.Query().Get("duration")
	if v == "" {
		reply(w, nil, fmt.Errorf("%w: duration is required", ErrBadRequest))
		return
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		reply(w, nil, fmt.Errorf("%w: duration %q is not a duration like 10s", ErrBadRequest, v))
		return
	}
	if err := profile.CheckDuration(dur, prof.MaxDuration()); err != nil {
		reply(w, nil, fmt.Errorf("%w: %v is outside %v..%v (the daemon's --profile.limit)", profile.ErrBadDuration, dur, profile.MinDuration, prof.MaxDuration()))
		return
	}
	ev := prof.Event()
	if v := r.URL.Query().Get("event"); v != "" {
		if ev, err = perfevent.Parse(v); err != nil {
			reply(w, nil, fmt.Errorf("%w: %w", ErrBadRequest, err))
			return
		}
	}
	s.d.prof.capturing.Store(true)
	p, err := prof.Capture(r.Context(), ev, dur)
	if !errors.Is(err, profile.ErrBusy) {
		s.d.prof.capturing.Store(false)
	}
	if errors.Is(err, profile.ErrBusy) {
		reply(w, nil, fmt.Errorf("%w: one on-demand capture at a time; try again when it ends", profile.ErrBusy))
		return
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	_, id, err := s.d.storeProfile(p, store.ProfileOnDemand)
	if err != nil {
		s.d.cfg.Logger.Warn("store on-demand profile", "err", err)
		w.Header().Set(api.HeaderStoreError, err.Error())
	} else {
		w.Header().Set(api.HeaderProfileID, id)
	}
	data, merr := profile.Marshal(p)
	if merr != nil {
		reply(w, nil, merr)
		return
	}
	writeProfile(w, data)
}
