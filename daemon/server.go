package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/store"
)

// Errors the API maps to status codes.
var (
	ErrUnknownProgram   = errors.New("unknown program")
	ErrAmbiguousProgram = errors.New("ambiguous program")
	ErrBadRequest       = errors.New("bad request")
)

// maxHistoryPoints bounds one history answer, so a request cannot make the
// daemon build an unbounded response.
const maxHistoryPoints = 100_000

// server answers the /v1 API from the sampler's view and the store.
type server struct {
	d *Daemon
}

func (s *server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/progs", s.progs)
	mux.HandleFunc("GET /v1/progs/{prog}", s.show)
	mux.HandleFunc("GET /v1/history", s.history)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/store/stats", s.storeStats)
	mux.HandleFunc("GET /v1/store/check", s.storeCheck)
	mux.HandleFunc("GET /v1/export", s.export)
	s.profileRoutes(mux)
	s.benchRoutes(mux)
	s.counterRoutes(mux)
	return mux
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrUnknownProgram):
			code = http.StatusNotFound
		case errors.Is(err, ErrAmbiguousProgram):
			code = http.StatusConflict
		case errors.Is(err, ErrBadRequest):
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
		v = api.ErrorAnswer{Error: err.Error()}
	}
	json.NewEncoder(w).Encode(v)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	reply(w, s.d.status(), nil)
}

func (s *server) progs(w http.ResponseWriter, r *http.Request) {
	all, err := boolParam(r, "all")
	if err != nil {
		reply(w, nil, err)
		return
	}
	switch f := r.URL.Query().Get("fields"); f {
	case "":
	case "counters":
		if all {
			reply(w, nil, fmt.Errorf("%w: fields=counters lists loaded programs only", ErrBadRequest))
			return
		}
		reply(w, s.d.counters(), nil)
		return
	default:
		reply(w, nil, fmt.Errorf("%w: fields=%q: want counters or nothing", ErrBadRequest, f))
		return
	}
	rows, err := s.d.rows(all)
	reply(w, rows, err)
}

// counters lists the loaded programs' latest counters, by id.
func (d *Daemon) counters() []api.ProgCounters {
	d.sampler.mu.RLock()
	out := make([]api.ProgCounters, 0, len(d.sampler.progs))
	for _, p := range d.sampler.progs {
		out = append(out, api.ProgCounters{ID: p.meta.ID, Tag: p.meta.Tag, LastSampleMs: p.curAt.UnixMilli(), Counters: sampleCounters(p.cur)})
	}
	d.sampler.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *server) show(w http.ResponseWriter, r *http.Request) {
	inst, err := s.d.resolveOne(r.PathValue("prog"))
	if err != nil {
		reply(w, nil, err)
		return
	}
	detail, err := s.d.detail(inst)
	reply(w, detail, err)
}

func (s *server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ref := q.Get("prog")
	if ref == "" {
		reply(w, nil, fmt.Errorf("%w: prog is required", ErrBadRequest))
		return
	}
	since, until, err := queryRange(q, time.Hour, time.Now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	var step time.Duration
	if v := q.Get("step"); v != "" {
		if step, err = time.ParseDuration(v); err != nil || step <= 0 {
			reply(w, nil, fmt.Errorf("%w: step %q is not a positive duration", ErrBadRequest, v))
			return
		}
	}
	h, err := s.d.history(ref, since, until, step)
	reply(w, h, err)
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := queryRange(q, 24*time.Hour, time.Now())
	if err != nil {
		reply(w, nil, err)
		return
	}
	events, err := s.d.store.Events(since, until)
	// prog narrows to one program's events: an id, a name or name@tag.
	if ref := q.Get("prog"); ref != "" && err == nil {
		name, tag, hasTag := strings.Cut(ref, "@")
		id, idErr := strconv.ParseUint(ref, 10, 32)
		kept := events[:0]
		for _, e := range events {
			if (idErr == nil && e.ID == uint32(id)) || (idErr != nil && e.Name == name && (!hasTag || e.Tag == tag)) {
				kept = append(kept, e)
			}
		}
		events = kept
	}
	reply(w, api.Events{Since: since, Until: until, Events: apiEvents(events)}, err)
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not a boolean", ErrBadRequest, name, v)
	}
	return b, nil
}

// timeParam parses RFC 3339 or a duration back from now ("1h").
func timeParam(v string, def, now time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	return api.ParseTime(v, now)
}

// queryRange reads the since and until parameters (default: back from now
// and now) and checks that they make a range.
func queryRange(q url.Values, back time.Duration, now time.Time) (since, until time.Time, err error) {
	if since, err = timeParam(q.Get("since"), now.Add(-back), now); err != nil {
		return since, until, fmt.Errorf("%w: since: %v", ErrBadRequest, err)
	}
	if until, err = timeParam(q.Get("until"), now, now); err != nil {
		return since, until, fmt.Errorf("%w: until: %v", ErrBadRequest, err)
	}
	if !until.After(since) {
		return since, until, fmt.Errorf("%w: until must be after since", ErrBadRequest)
	}
	return since, until, nil
}

// instance is one resolved program instance: its store record and, when
// loaded now, the sampler's live view.
type instance struct {
	rec  store.Program
	live *program
}

// resolve finds the instances a user's PROG names: a numeric id, a name, or
// name@tag. Loaded instances come first, then the rest newest first.
func (d *Daemon) resolve(ref string) ([]instance, error) {
	recs, err := d.store.Programs()
	if err != nil {
		return nil, err
	}
	name, tag, hasTag := strings.Cut(ref, "@")
	id, idErr := strconv.ParseUint(ref, 10, 32)
	var out []instance
	d.sampler.mu.RLock()
	for _, rec := range recs {
		match := false
		switch {
		case idErr == nil:
			match = rec.ID == uint32(id) && rec.Key.Boot == d.boot
		case hasTag:
			match = rec.Name == name && rec.Tag == tag
		default:
			match = rec.Name == name
		}
		if !match {
			continue
		}
		inst := instance{rec: rec}
		if p := d.sampler.progs[rec.ID]; p != nil && p.key == rec.Key {
			inst.live = p
		}
		out = append(out, inst)
	}
	d.sampler.mu.RUnlock()
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %q: no program with that id, name or name@tag", ErrUnknownProgram, ref)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].live != nil) != (out[j].live != nil) {
			return out[i].live != nil
		}
		return out[i].rec.FirstSeen.After(out[j].rec.FirstSeen)
	})
	return out, nil
}

// resolveOne picks the single instance PROG means: the loaded one, or if
// none is loaded the newest. Two loaded programs sharing a name are
// ambiguous.
func (d *Daemon) resolveOne(ref string) (instance, error) {
	insts, err := d.resolve(ref)
	if err != nil {
		return instance{}, err
	}
	if len(insts) > 1 && insts[1].live != nil {
		return instance{}, ambiguous(ref, insts)
	}
	return insts[0], nil
}

func ambiguous(ref string, insts []instance) error {
	var ids []string
	for _, in := range insts {
		if in.live != nil {
			ids = append(ids, fmt.Sprintf("%d (tag %s)", in.rec.ID, in.rec.Tag))
		}
	}
	return fmt.Errorf("%w %q: loaded as ids %s; use an id or name@tag", ErrAmbiguousProgram, ref, strings.Join(ids, ", "))
}

// liveRow builds the row of a live program. Called with the sampler's lock held.
func (d *Daemon) liveRow(p *program) api.ProgRow {
	cur := sampleCounters(p.cur)
	row := api.ProgRow{
		ID: p.meta.ID, Type: p.meta.Type, Name: p.meta.Name, Tag: p.meta.Tag, Loaded: true,
		Own: d.sampler.own(p), Counters: cur, AvgNsSinceLoad: api.Optional(cur.AvgNsSinceLoad()),
		LoadedAt: p.meta.LoadedAt, BootID: d.bootID, LastSample: p.curAt,
		Owners: apiOwners(p.meta.Owners), Attach: apiAttach(p.meta.Attach),
		SampledCPUPercent: d.sampledCPU(p.meta.ID),
	}
	d.fillCounters(&row)
	if p.havePrev {
		row.Rates = api.RatesBetween(sampleCounters(p.prev), cur, p.curAt.Sub(p.prevAt))
	}
	return row
}

// storedRow builds an api.ProgRow for an instance that is no longer loaded, from
// its last stored sample.
func (d *Daemon) storedRow(rec store.Program) (api.ProgRow, error) {
	var meta collectors.Meta
	if len(rec.Meta) > 0 {
		if err := json.Unmarshal(rec.Meta, &meta); err != nil {
			return api.ProgRow{}, fmt.Errorf("program %d metadata: %w", rec.ID, err)
		}
	}
	row := api.ProgRow{
		ID: rec.ID, Type: rec.Type, Name: rec.Name, Tag: rec.Tag, LoadedAt: meta.LoadedAt,
		UnloadedAt: rec.UnloadedAt, BootID: rec.BootID, Owners: apiOwners(meta.Owners), Attach: apiAttach(meta.Attach),
	}
	until := rec.UnloadedAt
	if until.IsZero() {
		until = time.Now()
	}
	points, err := d.store.Series(rec.Key, rec.FirstSeen, until)
	if err != nil {
		return api.ProgRow{}, err
	}
	if n := len(points); n > 0 {
		last := points[n-1]
		row.Counters = pointCounters(last)
		row.LastSample = last.Time
		row.AvgNsSinceLoad = api.Optional(row.Counters.AvgNsSinceLoad())
	}
	return row, nil
}

// rows lists loaded programs (and with all, every stored instance), by CPU %
// then run time, highest first.
func (d *Daemon) rows(all bool) ([]api.ProgRow, error) {
	d.sampler.mu.RLock()
	rows := make([]api.ProgRow, 0, len(d.sampler.progs))
	live := map[store.InstanceKey]bool{}
	for _, p := range d.sampler.progs {
		rows = append(rows, d.liveRow(p))
		live[p.key] = true
	}
	d.sampler.mu.RUnlock()
	if all {
		recs, err := d.store.Programs()
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if live[rec.Key] {
				continue
			}
			row, err := d.storedRow(rec)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		ci, cj := val(rows[i].CPUPercent), val(rows[j].CPUPercent)
		if ci != cj {
			return ci > cj
		}
		if rows[i].RunTimeNs != rows[j].RunTimeNs {
			return rows[i].RunTimeNs > rows[j].RunTimeNs
		}
		return rows[i].ID < rows[j].ID
	})
	return rows, nil
}

func val(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

func (d *Daemon) detail(inst instance) (api.ProgDetail, error) {
	if inst.live != nil {
		d.sampler.mu.RLock()
		defer d.sampler.mu.RUnlock()
		return api.ProgDetail{ProgRow: d.liveRow(inst.live), Meta: apiMeta(inst.live.meta)}, nil
	}
	row, err := d.storedRow(inst.rec)
	if err != nil {
		return api.ProgDetail{}, err
	}
	var meta collectors.Meta
	if len(inst.rec.Meta) > 0 {
		if err := json.Unmarshal(inst.rec.Meta, &meta); err != nil {
			return api.ProgDetail{}, err
		}
	}
	return api.ProgDetail{ProgRow: row, Meta: apiMeta(meta)}, nil
}

// history stitches the stored series of every instance PROG names, oldest
// first. With step > 0 it keeps the last sample of each step-long bucket.
// Rates are between consecutive kept points of the same instance.
func (d *Daemon) history(ref string, since, until time.Time, step time.Duration) (api.History, error) {
	if !until.After(since) {
		return api.History{}, fmt.Errorf("%w: until (%s) must be after since (%s)", ErrBadRequest, until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	if step > 0 && until.Sub(since)/step > maxHistoryPoints {
		return api.History{}, fmt.Errorf("%w: step %v over %v gives more than %d points", ErrBadRequest, step, until.Sub(since), maxHistoryPoints)
	}
	insts, err := d.resolve(ref)
	if err != nil {
		return api.History{}, err
	}
	if overlap(insts) {
		return api.History{}, ambiguous(ref, insts)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].rec.FirstSeen.Before(insts[j].rec.FirstSeen) })
	h := api.History{Program: ref, Since: since, Until: until, StepMs: step.Milliseconds(), Points: []api.HistoryPoint{}}
	for n, inst := range insts {
		points, res, err := d.points(inst.rec.Key, since, until, step)
		if err != nil {
			return api.History{}, err
		}
		h.Resolution = res.String()
		points = downsample(points, since, step)
		if len(h.Points)+len(points) > maxHistoryPoints {
			return api.History{}, fmt.Errorf("%w: more than %d points; use a larger --step or a shorter range", ErrBadRequest, maxHistoryPoints)
		}
		for i, p := range points {
			hp := api.HistoryPoint{Time: p.Time, ID: inst.rec.ID, Counters: pointCounters(p)}
			if i > 0 {
				prev := h.Points[len(h.Points)-1]
				hp.Rates = api.RatesBetween(prev.Counters, hp.Counters, hp.Time.Sub(prev.Time))
			} else if n > 0 {
				hp.Reload = true
			}
			h.Points = append(h.Points, hp)
		}
	}
	return h, nil
}

// points reads an instance's samples from the coarsest resolution that
// still gives one point per step: raw below a minute, minute rollups below an
// hour, hour rollups above. Rollups give each bucket's last sample; the
// bucket still filling comes from the raw samples.
func (d *Daemon) points(k store.InstanceKey, since, until time.Time, step time.Duration) ([]store.Point, store.Resolution, error) {
	res := store.Raw
	switch {
	case step >= time.Hour:
		res = store.Hour
	case step >= time.Minute:
		res = store.Minute
	}
	if res == store.Raw {
		p, err := d.store.Series(k, since, until)
		return p, res, err
	}
	rolled, err := d.store.RolledUpTo(res)
	if err != nil {
		return nil, res, err
	}
	rollups, err := d.store.Rollups(k, res, since.Add(-time.Duration(res)), until)
	if err != nil {
		return nil, res, err
	}
	var out []store.Point
	for _, r := range rollups {
		if !r.Last.Time.Before(since) && !r.Last.Time.After(until) {
			out = append(out, r.Last)
		}
	}
	if rolled.Before(until) {
		recent, err := d.store.Series(k, maxTime(since, rolled), until)
		if err != nil {
			return nil, res, err
		}
		out = append(out, recent...)
	}
	return out, res, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// overlap reports whether two instances were loaded at the same time, in
// which case a name does not pick one series.
func overlap(insts []instance) bool {
	live := 0
	for _, in := range insts {
		if in.rec.Loaded() {
			live++
		}
	}
	return live > 1
}

// downsample keeps the last point of each step-long bucket counted from
// since. Counters are cumulative, so dropping points loses no runs.
func downsample(points []store.Point, since time.Time, step time.Duration) []store.Point {
	if step <= 0 || len(points) == 0 {
		return points
	}
	out := points[:0:0]
	bucket := func(t time.Time) int64 { return int64(t.Sub(since) / step) }
	for i, p := range points {
		if i+1 == len(points) || bucket(points[i+1].Time) != bucket(p.Time) {
			out = append(out, p)
		}
	}
	return out
}
