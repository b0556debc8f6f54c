package httpapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
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
			reply(w, nil, fmt.Errorf("%w: fields=counters lists loaded programs only", errs.BadRequest))
			return
		}
		reply(w, s.d.counters(), nil)
		return
	default:
		reply(w, nil, fmt.Errorf("%w: fields=%q: want counters or nothing", errs.BadRequest, f))
		return
	}
	rows, err := s.d.rows(all)
	reply(w, rows, err)
}

// counters lists the loaded programs' latest counters, by id.
func (d *daemon) counters() []api.ProgCounters {
	var out []api.ProgCounters
	d.Sampler.Read(func(v sampler.View) {
		out = make([]api.ProgCounters, 0, v.Len())
		for _, p := range v.Programs() {
			cur, at := p.Latest()
			out = append(out, api.ProgCounters{ID: p.Meta().ID, Tag: p.Meta().Tag, LastSampleMs: at.UnixMilli(), Counters: sampler.Counters(cur)})
		}
	})
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
func (d *daemon) rows(all bool) ([]api.ProgRow, error) {
	var rows []api.ProgRow
	live := map[store.InstanceKey]bool{}
	d.Sampler.Read(func(v sampler.View) {
		rows = make([]api.ProgRow, 0, v.Len())
		for _, p := range v.Programs() {
			rows = append(rows, d.liveRow(p))
			live[p.Key()] = true
		}
	})
	if all {
		recs, err := d.Store.Programs()
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

// liveRow builds the row of a live program, inside the sampler's Read.
func (d *daemon) liveRow(p *sampler.Program) api.ProgRow {
	m, key := p.Meta(), p.IdentityKey()
	smp, at := p.Latest()
	cur := sampler.Counters(smp)
	row := api.ProgRow{
		ID: m.ID, Type: m.Type, Name: m.Name, KernelName: m.KernelName, Tag: m.Tag, Loaded: true,
		Identity: key, IdentityID: identity.ShortID(key), Where: identity.Attach(m.Attach),
		Own: p.Own(), Counters: cur, AvgNsSinceLoad: api.Optional(cur.AvgNsSinceLoad()),
		LoadedAt: m.LoadedAt, BootID: d.BootID, LastSample: at,
		Owners: slices.Clone(m.Owners), Attach: slices.Clone(m.Attach), // copied under the sampler's lock
		SampledCPUPercent: d.Profiling.SampledCPU(m.ID),
		MapBytes:          d.Maps.BytesOf(m.MapIDs),
	}
	d.Counters.Fill(&row)
	if prev, prevAt, ok := p.Previous(); ok {
		row.Rates = api.RatesBetween(sampler.Counters(prev), cur, at.Sub(prevAt))
	}
	return row
}

// storedRow builds an api.ProgRow for an instance that is no longer loaded, from
// its last stored sample.
func (d *daemon) storedRow(rec store.Program) (api.ProgRow, error) {
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
		UnloadedAt: rec.UnloadedAt, BootID: rec.BootID, Owners: meta.Owners, Attach: meta.Attach,
	}
	until := rec.UnloadedAt
	if until.IsZero() {
		until = d.now()
	}
	points, err := d.Store.Series(rec.Key, rec.FirstSeen, until)
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

func (d *daemon) detail(inst instance) (api.ProgDetail, error) {
	if inst.live != nil {
		var detail api.ProgDetail
		d.Sampler.Read(func(sampler.View) {
			meta := *inst.live.Meta()
			meta.Owners, meta.Attach = slices.Clone(meta.Owners), slices.Clone(meta.Attach)
			detail = api.ProgDetail{ProgRow: d.liveRow(inst.live), Meta: meta}
		})
		return detail, nil
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
	return api.ProgDetail{ProgRow: row, Meta: meta}, nil
}
