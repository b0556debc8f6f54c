package query

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/latency"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// ProgCounters lists the loaded programs' latest counters, by id.
func (q *Query) ProgCounters() []api.ProgCounters {
	var out []api.ProgCounters
	q.Sampler.Read(func(v sampler.View) {
		out = make([]api.ProgCounters, 0, v.Len())
		for _, p := range v.Programs() {
			cur, at := p.Latest()
			out = append(out, api.ProgCounters{ID: p.Meta().ID, Tag: p.Meta().Tag, LastSampleMs: at.UnixMilli(), Counters: sampler.Counters(cur)})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Rows lists loaded programs (and with all, every stored instance), by CPU %
// then run time, highest first.
func (q *Query) Rows(all bool) ([]api.ProgRow, error) {
	rows, leaving, err := q.rows(all)
	if leaving != nil && err == nil {
		// A program the sampler let go whose tick is being stored: its
		// row would say unloaded before its unloaded event is there to
		// ask for. Answer as of that tick, stored.
		timeout := time.NewTimer(leavingWait)
		defer timeout.Stop()
		select {
		case <-leaving:
			rows, _, err = q.rows(all)
		case <-timeout.C:
		}
	}
	return rows, err
}

// leavingWait bounds how long Rows waits for a tick being stored: the
// length of one store write, unless the disk stalls.
const leavingWait = 2 * time.Second

// rows is Rows as the sampler and store are now; leaving is closed once
// the tick that let go of a program listed from the store is stored (nil
// if none).
func (q *Query) rows(all bool) (rows []api.ProgRow, leaving <-chan struct{}, err error) {
	live := map[store.InstanceKey]bool{}
	var gone func(store.InstanceKey) (<-chan struct{}, bool)
	q.Sampler.Read(func(v sampler.View) {
		rows = make([]api.ProgRow, 0, v.Len())
		for _, p := range v.Programs() {
			rows = append(rows, q.liveRow(p))
			live[p.Key()] = true
		}
		if all {
			gone = v.LeavingNow()
		}
	})
	if !all {
		return sortRows(rows), nil, nil
	}
	// Read after the sampler's view: what a tick let go of before it is
	// either stored now or among the view's leaving.
	recs, err := q.Store.Programs()
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range recs {
		if live[rec.Key] {
			continue
		}
		if done, ok := gone(rec.Key); ok {
			leaving = done
		}
		row, err := q.storedRow(rec)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
	}
	return sortRows(rows), leaving, nil
}

// sortRows orders rows by CPU % then run time, highest first.
func sortRows(rows []api.ProgRow) []api.ProgRow {
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
	return rows
}

func val(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

// liveRow builds the row of a live program, inside the sampler's Read.
func (q *Query) liveRow(p *sampler.Program) api.ProgRow {
	m, key := p.Meta(), p.IdentityKey()
	smp, at := p.Latest()
	cur := sampler.Counters(smp)
	row := api.ProgRow{
		ID: m.ID, Type: m.Type, Name: m.Name, KernelName: m.KernelName, Tag: m.Tag, Loaded: true,
		Identity: key, IdentityID: identity.ShortID(key), Where: identity.Where(m.Attach), Pod: m.RunPod(),
		Own: p.Own(), Counters: cur, AvgNsSinceLoad: api.Optional(cur.AvgNsSinceLoad()),
		LoadedAt: m.LoadedAt, BootID: q.BootID, LastSample: at,
		Owners: slices.Clone(m.Owners), Attach: slices.Clone(m.Attach), Loader: m.Loader, // copied under the sampler's lock
		SampledCPUPercent: q.Profiling.SampledCPU(m.ID),
		MapBytes:          q.Maps.BytesOf(m.MapIDs),
	}
	q.Counters.Fill(&row)
	if prev, prevAt, ok := p.Previous(); ok {
		row.Rates = api.RatesBetween(sampler.Counters(prev), cur, at.Sub(prevAt))
	}
	return row
}

// storedRow builds an api.ProgRow for an instance that is no longer loaded, from
// its last stored sample.
func (q *Query) storedRow(rec store.Program) (api.ProgRow, error) {
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
		Identity: rec.Identity, IdentityID: identity.ShortID(rec.Identity), Where: identity.Where(meta.Attach), Pod: meta.RunPod(),
		UnloadedAt: rec.UnloadedAt, BootID: rec.BootID, Owners: meta.Owners, Attach: meta.Attach, Loader: meta.Loader,
	}
	until := rec.UnloadedAt
	if until.IsZero() {
		until = q.Now()
	}
	points, err := q.Store.Series(rec.Key, rec.FirstSeen, until)
	if err != nil {
		return api.ProgRow{}, err
	}
	if n := len(points); n > 0 {
		last := points[n-1]
		row.Counters = PointCounters(last)
		row.LastSample = last.Time
		row.AvgNsSinceLoad = api.Optional(row.Counters.AvgNsSinceLoad())
	}
	return row, nil
}

// Detail is one program's row and its metadata, live or as stored.
func (q *Query) Detail(inst Instance) (api.ProgDetail, error) {
	d, err := q.detail(inst)
	if err != nil {
		return d, err
	}
	w, ok, err := q.Store.LastLatency(inst.Rec.Key)
	if err != nil && q.Store.Damaged() == "" {
		return d, err
	}
	// A damaged store may fail this read: the live figures still answer.
	if ok {
		v := latency.View(w, inst.Rec.Name)
		d.Latency = &v
	}
	return d, nil
}

func (q *Query) detail(inst Instance) (api.ProgDetail, error) {
	if inst.Live != nil {
		var detail api.ProgDetail
		q.Sampler.Read(func(sampler.View) {
			meta := *inst.Live.Meta()
			meta.Owners, meta.Attach = slices.Clone(meta.Owners), slices.Clone(meta.Attach)
			detail = api.ProgDetail{ProgRow: q.liveRow(inst.Live), Meta: meta}
		})
		return detail, nil
	}
	row, err := q.storedRow(inst.Rec)
	if err != nil {
		return api.ProgDetail{}, err
	}
	var meta collectors.Meta
	if len(inst.Rec.Meta) > 0 {
		if err := json.Unmarshal(inst.Rec.Meta, &meta); err != nil {
			return api.ProgDetail{}, err
		}
	}
	return api.ProgDetail{ProgRow: row, Meta: meta}, nil
}
