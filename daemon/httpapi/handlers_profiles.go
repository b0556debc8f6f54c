package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/query"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

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
	return nil, fmt.Errorf("%w: kind %q: want continuous, on-demand or all", errs.BadRequest, k)
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
	list, err := s.d.Store.ListProfiles(since, until)
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
	reply(w, query.NonNil(list), nil)
}

func (s *server) getProfile(w http.ResponseWriter, r *http.Request) {
	info, data, err := s.d.Store.GetProfile(r.PathValue("id"))
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
	merged, err := profiling.MergeStored(s.d.Store, list, since, until)
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

// captureProfile takes an on-demand profile of ?duration, one at a time,
// stores it and answers it. If the client goes away the capture stops and
// nothing is stored.
func (s *server) captureProfile(w http.ResponseWriter, r *http.Request) {
	prof, err := s.d.Profiling.Profiler()
	if err != nil {
		reply(w, nil, err)
		return
	}
	v := r.URL.Query().Get("duration")
	if v == "" {
		reply(w, nil, fmt.Errorf("%w: duration is required", errs.BadRequest))
		return
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		reply(w, nil, fmt.Errorf("%w: duration %q is not a duration like 10s", errs.BadRequest, v))
		return
	}
	if err := profile.CheckDuration(dur, prof.MaxDuration()); err != nil {
		reply(w, nil, fmt.Errorf("%w: %v is outside %v..%v (the daemon's --profile.limit)", profile.ErrBadDuration, dur, profile.MinDuration, prof.MaxDuration()))
		return
	}
	ev := prof.Event()
	if v := r.URL.Query().Get("event"); v != "" {
		if ev, err = perfevent.Parse(v); err != nil {
			reply(w, nil, fmt.Errorf("%w: %w", errs.BadRequest, err))
			return
		}
	}
	p, err := s.d.Profiling.Capture(r.Context(), prof, ev, dur)
	if errors.Is(err, profile.ErrBusy) {
		reply(w, nil, fmt.Errorf("%w: one on-demand capture at a time; try again when it ends", profile.ErrBusy))
		return
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	_, id, err := s.d.Profiling.Store(p, store.ProfileOnDemand)
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
