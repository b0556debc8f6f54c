package daemon

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// progs answers GET /v1/progs: the loaded programs, with ?all=true every
// stored instance too, with ?fields=counters only their counters.
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

// show answers GET /v1/progs/{prog}: one program's row and metadata.
func (s *server) show(w http.ResponseWriter, r *http.Request) {
	inst, err := s.d.resolveOne(r.PathValue("prog"))
	if err != nil {
		reply(w, nil, err)
		return
	}
	detail, err := s.d.detail(inst)
	reply(w, detail, err)
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

// liveRow builds the row of a live program. Called with the sampler's lock held.
func (d *Daemon) liveRow(p *program) api.ProgRow {
	cur := sampleCounters(p.cur)
	row := api.ProgRow{
		ID: p.meta.ID, Type: p.meta.Type, Name: p.meta.Name, KernelName: p.meta.KernelName, Tag: p.meta.Tag, Loaded: true,
		Identity: p.identKey, IdentityID: identity.ShortID(p.identKey), Where: identity.Attach(p.meta.Attach),
		Own: d.sampler.own(p), Counters: cur, AvgNsSinceLoad: api.Optional(cur.AvgNsSinceLoad()),
		LoadedAt: p.meta.LoadedAt, BootID: d.bootID, LastSample: p.curAt,
		Owners: apiOwners(p.meta.Owners), Attach: apiAttach(p.meta.Attach),
		SampledCPUPercent: d.sampledCPU(p.meta.ID),
		MapBytes:          d.maps.bytesOf(p.meta.MapIDs),
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
	// A record from before full names were kept has the kernel's name only.
	kernelName := cmp.Or(rec.KernelName, rec.Name)
	row := api.ProgRow{
		ID: rec.ID, Type: rec.Type, Name: rec.Name, KernelName: kernelName, Tag: rec.Tag, LoadedAt: meta.LoadedAt,
		Identity: rec.Identity, IdentityID: identity.ShortID(rec.Identity), Where: identity.Attach(meta.Attach),
		UnloadedAt: rec.UnloadedAt, BootID: rec.BootID, Owners: apiOwners(meta.Owners), Attach: apiAttach(meta.Attach),
	}
	until := rec.UnloadedAt
	if until.IsZero() {
		until = d.now()
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
