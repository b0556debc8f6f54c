package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// CPU profiling of BPF programs (issue 4). The profile package samples and
// symbolizes; this file runs it: continuous windows stored as they end,
// on-demand captures through the API, the sampled CPU % per program of the
// latest window, and the profiles' retention.

// ProfileConfig configures continuous and on-demand profiling.
type ProfileConfig struct {
	// Every is how often a continuous window starts; 0 turns continuous
	// profiling off (on-demand captures still work).
	Every time.Duration
	// Duration is each window's length, at most Every; 0 means Every (no
	// gap between windows).
	Duration time.Duration
	// Hz is the sampling frequency per CPU; 0 means 99.
	Hz int
	// Limit is the longest on-demand capture; 0 means DefaultProfileLimit.
	Limit time.Duration
	// Retention is how long profiles are kept; 0 means
	// DefaultRetentionProfiles.
	Retention time.Duration
	// Event is what samples are taken on: "cpu-clock" (the default, every
	// kernel has it), or "cycles", "instructions" or "llc-misses", which
	// need a hardware PMU and fall back to cpu-clock, with a warning that
	// says why, where they do not open.
	Event string
}

// Defaults for the profiling flags.
const (
	DefaultProfileEvery      = time.Minute
	DefaultProfileHz         = profile.DefaultHz
	DefaultProfileLimit      = 5 * time.Minute
	DefaultRetentionProfiles = 7 * 24 * time.Hour

	// maxMergeProfiles bounds one merge request; a week of one-minute
	// windows is 10,080.
	maxMergeProfiles = 20_000
	// mergeBatch is how many profiles a merge reads and parses at once, so
	// its memory stays that of the merged profile plus a batch.
	mergeBatch = 32
)

// Validate checks the profiling flags and fills defaults. bpfperfd calls it
// while parsing flags, so a bad value stops it with one line; the daemon
// calls it again before profiling.
func (c *ProfileConfig) Validate() error {
	if c.Event == "" {
		c.Event = perfevent.CPUClock.String()
	}
	ev, err := perfevent.Parse(c.Event)
	if err != nil {
		return fmt.Errorf("%w: --profile.event: %w", ErrBadConfig, err)
	}
	c.Event = ev.String()
	if c.Hz == 0 {
		c.Hz = DefaultProfileHz
	}
	if c.Limit == 0 {
		c.Limit = DefaultProfileLimit
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetentionProfiles
	}
	if c.Duration == 0 {
		c.Duration = c.Every
	}
	window := func(name string, d time.Duration) error {
		if d < profile.MinDuration || d > store.MaxProfileDuration {
			return fmt.Errorf("%w: --profile.%s %v is outside %v..%v", ErrBadConfig, name, d, profile.MinDuration, store.MaxProfileDuration)
		}
		return nil
	}
	switch {
	case c.Every < 0:
		return fmt.Errorf("%w: --profile.every %v is negative (0 turns continuous profiling off)", ErrBadConfig, c.Every)
	case c.Every > 0:
		if err := window("every", c.Every); err != nil {
			return err
		}
		if err := window("duration", c.Duration); err != nil {
			return err
		}
		if c.Duration > c.Every {
			return fmt.Errorf("%w: --profile.duration %v is longer than --profile.every %v", ErrBadConfig, c.Duration, c.Every)
		}
	}
	if c.Hz < 1 || c.Hz > profile.MaxHz {
		return fmt.Errorf("%w: --profile.hz %d is outside 1..%d", ErrBadConfig, c.Hz, profile.MaxHz)
	}
	if err := window("limit", c.Limit); err != nil {
		return err
	}
	if c.Retention < time.Second {
		return fmt.Errorf("%w: --retention.profiles %v is shorter than 1s", ErrBadConfig, c.Retention)
	}
	return nil
}

// profiling is the daemon's profiling state.
type profiling struct {
	mu   sync.Mutex
	cfg  ProfileConfig
	prof *profile.Profiler // nil while off
	// learn queues program ids the sampler saw appear for the learner.
	learn     chan uint32
	capturing atomic.Bool

	// From the latest continuous window: each program's share, and which
	// programs the window covers whole (known to the symbolizer when it
	// began, that is at the end of the window before), so an idle program
	// reads 0% and one loaded mid-window reads nothing.
	shares      map[uint32]float64
	covered     map[uint32]bool
	known       map[uint32]bool
	lastEnd     time.Time
	last        store.ProfileInfo
	lastBuild   time.Duration
	windows     int64
	lastErr     error
	storeFailed bool
}

// ErrProfilingOff means CPU profiling could not start on this host.
var ErrProfilingOff = errors.New("CPU profiling is off")

// startProfiling starts the learner, continuous profiling (unless
// --profile.every is 0) and profile retention. An error leaves profiling
// off; the daemon runs on.
func (d *Daemon) startProfiling(ctx context.Context) error {
	cfg := d.cfg.Profile
	if err := cfg.Validate(); err != nil {
		return err
	}
	event, _ := perfevent.Parse(cfg.Event) // Validate parsed it
	newProfiler := func(e perfevent.Event) (*profile.Profiler, error) {
		// The sampled counters mechanism samples every other event over
		// the same windows (counters_sampled.go).
		others := slices.DeleteFunc(slices.Clone(perfevent.All), func(o perfevent.Event) bool { return o == e })
		return profile.NewProfiler(profile.ProfilerConfig{Sampler: profile.SamplerConfig{
			Event: e, Hz: cfg.Hz, MaxDuration: cfg.Limit, ProcRoot: d.cfg.ProcRoot,
		}, Events: others, WindowStarts: func(start time.Time) { d.sampledWindowStarts(ctx, start) }})
	}
	prof, err := newProfiler(event)
	if err != nil && event.Hardware() {
		// Whatever refused the hardware event (no PMU, a PMU that cannot
		// sample it, counters busy), cpu-clock profiles still work.
		d.cfg.Logger.Warn("profiling on cpu-clock instead", "event", event, "reason", err)
		event = perfevent.CPUClock
		prof, err = newProfiler(event)
	}
	if err != nil {
		return fmt.Errorf("start sampler: %w", err)
	}
	cfg.Event = event.String()
	learn := make(chan uint32, 4096)
	d.prof.mu.Lock()
	d.prof.cfg, d.prof.prof, d.prof.learn = cfg, prof, learn
	d.prof.mu.Unlock()

	log := d.cfg.Logger
	go func() {
		// Programs that appeared before the queue existed.
		if _, err := prof.Symbolizer().LearnAll(); err != nil {
			log.Warn("profiling: learn loaded programs", "err", err)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-learn:
				if err := prof.Symbolizer().Learn(id); err != nil && !errors.Is(err, os.ErrNotExist) {
					log.Debug("profiling: learn program", "id", id, "err", err)
				}
			}
		}
	}()
	go d.expireProfiles(ctx)
	if cfg.Every > 0 {
		go func() {
			emit := func(w *profile.Window, err error) {
				var p *pprof.Profile
				if w != nil {
					p = w.Profile
				}
				d.profileWindow(p, err)
				d.sampledWindowEnds(ctx, w) // sampled perf counters (counters_sampled.go)
			}
			if err := prof.Run(ctx, cfg.Every, cfg.Duration, emit); err != nil {
				d.setProfileError(err)
				log.Warn("continuous CPU profiling stopped", "err", err)
			}
		}()
	}
	log.Info("CPU profiling on", "event", event, "hz", cfg.Hz, "every", cfg.Every, "window", cfg.Duration, "limit", cfg.Limit)
	return nil
}

// profileWindow stores one continuous window and keeps its program shares
// for the progs view.
func (d *Daemon) profileWindow(p *pprof.Profile, err error) {
	if err != nil {
		d.setProfileError(err)
		d.cfg.Logger.Warn("profiling window", "err", err)
		return
	}
	end := time.Unix(0, p.TimeNanos+p.DurationNanos)
	build := time.Since(end)
	shares, serr := profile.ProgramShares(p)
	info, id, err := d.storeProfile(p, store.ProfileContinuous)
	known := map[uint32]bool{}
	for _, id := range d.prof.prof.Symbolizer().Programs() {
		known[id] = true
	}
	pr := &d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.windows++
	pr.covered, pr.known = pr.known, known
	pr.shares, pr.lastEnd, pr.lastBuild = shares, end, build
	if serr != nil {
		pr.shares = nil
	}
	info.ID = id
	pr.last = info
	pr.lastErr = err
	if err != nil {
		// Log a failing store once, not every window.
		if !pr.storeFailed {
			d.cfg.Logger.Warn("store profile", "err", err)
		}
		pr.storeFailed = true
	} else {
		pr.storeFailed = false
	}
}

// storeProfile stores p and returns its info and id.
func (d *Daemon) storeProfile(p *pprof.Profile, kind string) (store.ProfileInfo, string, error) {
	info := store.ProfileInfo{
		Start: time.Unix(0, p.TimeNanos), Duration: p.DurationNanos, Kind: kind,
		Event: profileEvent(p), Hz: d.prof.cfg.Hz, Samples: sampleCount(p),
	}
	data, err := profile.Marshal(p)
	if err != nil {
		return info, "", err
	}
	info.Bytes = len(data)
	id, err := d.store.PutProfile(info, data)
	return info, id, err
}

// profileEvent names the event p sampled: its value type, "cpu" being
// cpu-clock's.
func profileEvent(p *pprof.Profile) string {
	if p.DefaultSampleType == "" || p.DefaultSampleType == "cpu" {
		return perfevent.CPUClock.String()
	}
	return p.DefaultSampleType
}

func sampleCount(p *pprof.Profile) int64 {
	var n int64
	for _, s := range p.Sample {
		if len(s.Value) > 0 {
			n += s.Value[0]
		}
	}
	return n
}

func (d *Daemon) setProfileError(err error) {
	d.prof.mu.Lock()
	d.prof.lastErr = err
	d.prof.mu.Unlock()
}

// expireProfiles deletes profiles past their retention once a minute.
func (d *Daemon) expireProfiles(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := d.store.ExpireProfiles(time.Now(), d.prof.cfg.Retention); err != nil {
			d.cfg.Logger.Warn("expire profiles", "err", err)
		} else if n > 0 {
			d.cfg.Logger.Debug("expired profiles", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// profiler returns the running profiler, or an error saying why there is
// none.
func (d *Daemon) profiler() (*profile.Profiler, error) {
	d.prof.mu.Lock()
	defer d.prof.mu.Unlock()
	if d.prof.prof == nil {
		return nil, fmt.Errorf("%w: the daemon could not start it (see its log)", ErrProfilingOff)
	}
	return d.prof.prof, nil
}

// profileRoutes registers the /v1/profiles endpoints. The GETs only read
// the store; the POST starts a bounded capture.
func (s *server) profileRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/profiles", s.listProfiles)
	mux.HandleFunc("GET /v1/profiles/merge", s.mergeProfiles)
	mux.HandleFunc("GET /v1/profiles/{id}", s.getProfile)
	mux.HandleFunc("POST /v1/profiles/capture", s.captureProfile)
}

// profileError answers an error with the status code its kind calls for.
func profileError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, profile.ErrBadDuration):
		code = http.StatusBadRequest
	case errors.Is(err, store.ErrNoProfile), errors.Is(err, profile.ErrNoProfiles):
		code = http.StatusNotFound
	case errors.Is(err, profile.ErrBusy):
		code = http.StatusConflict
	case errors.Is(err, ErrProfilingOff):
		code = http.StatusServiceUnavailable
	case errors.Is(err, perfevent.ErrNoPMU), errors.Is(err, perfevent.ErrPMURefused):
		code = http.StatusNotImplemented // this host cannot sample the event
	case errors.Is(err, perfevent.ErrCountersBusy):
		code = http.StatusConflict
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(api.ErrorAnswer{Error: err.Error()})
}

func writeProfile(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// profileRange reads since (default 1h back) and until (default now).
func profileRange(r *http.Request) (time.Time, time.Time, error) {
	return queryRange(r.URL.Query(), time.Hour, time.Now())
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
	since, until, err := profileRange(r)
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
		profileError(w, err)
		return
	}
	reply(w, apiProfiles(list), nil)
}

func (s *server) getProfile(w http.ResponseWriter, r *http.Request) {
	info, data, err := s.d.store.GetProfile(r.PathValue("id"))
	if err != nil {
		profileError(w, err)
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
		profileError(w, err)
		return
	}
	if len(list) == 0 {
		profileError(w, fmt.Errorf("%w between %s and %s", profile.ErrNoProfiles, since.Format(time.RFC3339), until.Format(time.RFC3339)))
		return
	}
	if len(list) > maxMergeProfiles {
		profileError(w, fmt.Errorf("%w: %d profiles in the range, more than %d: narrow it", ErrBadRequest, len(list), maxMergeProfiles))
		return
	}
	var merged *pprof.Profile
	for batch := range chunks(list, mergeBatch) {
		data, err := s.d.store.ProfileData(batch)
		if err != nil {
			profileError(w, err)
			return
		}
		ps := make([]*pprof.Profile, 0, len(batch)+1)
		if merged != nil {
			ps = append(ps, merged)
		}
		for i, b := range data {
			p, err := profile.ParseData(b)
			if err != nil {
				profileError(w, fmt.Errorf("stored profile %s: %w", batch[i].ID, err))
				return
			}
			ps = append(ps, p)
		}
		if merged, err = profile.Merge(ps...); err != nil {
			profileError(w, err)
			return
		}
	}
	data, err := profile.Marshal(merged)
	if err != nil {
		profileError(w, err)
		return
	}
	w.Header().Set(api.HeaderProfileCount, strconv.Itoa(len(list)))
	writeProfile(w, data)
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
		profileError(w, err)
		return
	}
	v := r.URL.Query().Get("duration")
	if v == "" {
		profileError(w, fmt.Errorf("%w: duration is required", ErrBadRequest))
		return
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		profileError(w, fmt.Errorf("%w: duration %q is not a duration like 10s", ErrBadRequest, v))
		return
	}
	if err := profile.CheckDuration(dur, prof.MaxDuration()); err != nil {
		profileError(w, fmt.Errorf("%w: %v is outside %v..%v (the daemon's --profile.limit)", profile.ErrBadDuration, dur, profile.MinDuration, prof.MaxDuration()))
		return
	}
	ev := prof.Event()
	if v := r.URL.Query().Get("event"); v != "" {
		if ev, err = perfevent.Parse(v); err != nil {
			profileError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
			return
		}
	}
	s.d.prof.capturing.Store(true)
	p, err := prof.Capture(r.Context(), ev, dur)
	if !errors.Is(err, profile.ErrBusy) {
		s.d.prof.capturing.Store(false)
	}
	if errors.Is(err, profile.ErrBusy) {
		profileError(w, fmt.Errorf("%w: one on-demand capture at a time; try again when it ends", profile.ErrBusy))
		return
	}
	if err != nil {
		profileError(w, err)
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
		profileError(w, merr)
		return
	}
	writeProfile(w, data)
}

// sampledCPU is a program's share of sampled CPU time in the latest
// continuous window, nil when no recent window covers it.
func (d *Daemon) sampledCPU(id uint32) *float64 {
	pr := &d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.shares == nil || time.Since(pr.lastEnd) > 2*pr.cfg.Every+10*time.Second {
		return nil
	}
	v, ok := pr.shares[id]
	if !ok && !pr.covered[id] {
		return nil
	}
	return &v
}

// profilingStatus reports profiling in /v1/status, nil when off.
func (d *Daemon) profilingStatus() *api.ProfilingStatus {
	pr := &d.prof
	pr.mu.Lock()
	if pr.prof == nil {
		pr.mu.Unlock()
		return nil
	}
	st := &api.ProfilingStatus{
		Continuous: pr.cfg.Every > 0, Event: pr.cfg.Event, Hz: pr.cfg.Hz,
		EveryMs: pr.cfg.Every.Milliseconds(), WindowMs: pr.cfg.Duration.Milliseconds(),
		MaxCaptureMs: pr.cfg.Limit.Milliseconds(), RetentionMs: pr.cfg.Retention.Milliseconds(),
		LastProfileID: pr.last.ID, LastProfileStart: pr.last.Start, LastProfileSamples: pr.last.Samples,
		LastProfileBytes: pr.last.Bytes, LastBuildMs: float64(pr.lastBuild.Microseconds()) / 1000,
		Windows: pr.windows, CaptureRunning: pr.capturing.Load(),
	}
	if pr.lastErr != nil {
		st.LastError = pr.lastErr.Error()
	}
	sym := pr.prof.Symbolizer()
	pr.mu.Unlock()
	st.ProgramsKnown = len(sym.Programs())
	st.StoredProfiles, st.StoredBytes, _ = d.store.ProfileBytes()
	return st
}

// learnProfile tells the symbolizer about a program that just appeared.
// The sampler calls it under its lock: the id is queued for the learner
// goroutine (a full queue drops it; the sampler's Observe learns programs
// it finds in samples anyway).
func (d *Daemon) learnProfile(id uint32) {
	d.prof.mu.Lock()
	ch := d.prof.learn
	d.prof.mu.Unlock()
	if ch == nil {
		return // not started: startProfiling learns every loaded program
	}
	select {
	case ch <- id:
	default:
	}
}
