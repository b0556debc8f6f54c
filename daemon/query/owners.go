package query

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/mapwatch"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/store"
)

// noHolder is the owner of programs and maps no process holds.
const noHolder = "(no holder)"

// OnlyOwner keeps the rows ref names (ownerMatches), and fails with
// errs.UnknownOwner when none is.
func OnlyOwner(rows []api.OwnerRow, ref string) ([]api.OwnerRow, error) {
	kept := rows[:0]
	for _, o := range rows {
		if ownerMatches(o, ref) {
			kept = append(kept, o)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%w %q (bpfperf owners lists them)", errs.UnknownOwner, ref)
	}
	return kept, nil
}

// ownerMatches says whether ref names o: its name (comm[pid] or pin
// path), pid, comm, unit, container or pod (podMatches).
func ownerMatches(o api.OwnerRow, ref string) bool {
	return ref == o.Owner || (o.PID != 0 && ref == strconv.Itoa(o.PID)) ||
		(o.Comm != "" && ref == o.Comm) || (o.Unit != "" && ref == o.Unit) || (o.Container != "" && ref == o.Container) ||
		podMatches(o.Pod, ref)
}

// podMatches says whether ref names pod p: "NAMESPACE/POD", the pod's
// name, or its workload as "KIND/NAME" or "NAMESPACE/KIND/NAME".
func podMatches(p *collectors.Pod, ref string) bool {
	return p != nil && (ref == p.Namespace+"/"+p.Pod || ref == p.Pod || ref == p.Workload || ref == p.Namespace+"/"+p.Workload)
}

// ownerTally adds programs and maps up by owner.
type ownerTally map[string]*api.OwnerRow

// row returns the owner's row, charging to the first of owners (they
// come sorted by pid), or to noHolder.
func (t ownerTally) row(owners []collectors.Owner) *api.OwnerRow {
	name, kind, o := noHolder, "none", collectors.Owner{}
	switch {
	case len(owners) > 0 && owners[0].PID == 0 && owners[0].Pin != "":
		o = owners[0]
		name, kind = "pin:"+o.Pin, "pin"
	case len(owners) > 0:
		o = owners[0]
		name, kind = o.Comm+"["+strconv.Itoa(o.PID)+"]", "process"
	}
	r := t[name]
	if r == nil {
		r = &api.OwnerRow{Owner: name, Kind: kind}
		if kind == "process" {
			r.PID, r.Comm, r.Unit, r.Cgroup, r.Container = o.PID, o.Comm, o.Unit, o.Cgroup, o.Container
		}
		t[name] = r
	}
	if r.Pod == nil && kind == "process" {
		// A map's holders are read apart from the programs', and may be
		// named before their pod is.
		r.Pod = o.Pod
	}
	return r
}

func addTo(dst **float64, v *float64) {
	if v == nil {
		return
	}
	if *dst == nil {
		*dst = new(float64)
	}
	**dst += *v
}

// sorted lists the rows by CPU %, then run time, highest first.
func (t ownerTally) sorted() []api.OwnerRow {
	out := make([]api.OwnerRow, 0, len(t))
	for _, r := range t {
		out = append(out, *r)
	}
	val := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if val(a.CPUPercent) != val(b.CPUPercent) {
			return val(a.CPUPercent) > val(b.CPUPercent)
		}
		if a.RunTimeNs != b.RunTimeNs {
			return a.RunTimeNs > b.RunTimeNs
		}
		return a.Owner < b.Owner
	})
	return out
}

// OwnersLive charges every loaded program (its cumulative counters and
// its rates over the last two sweeps) and every map of the last reading
// to its owner.
func (q *Query) OwnersLive() []api.OwnerRow {
	t := ownerTally{}
	q.Sampler.Read(func(v sampler.View) {
		for _, p := range v.Programs() {
			row := q.liveRow(p)
			r := t.row(p.Meta().Owners)
			r.Present = true
			r.Programs++
			r.RunCnt += row.RunCnt
			r.RunTimeNs += row.RunTimeNs
			r.RecursionMisses += row.RecursionMisses
			addTo(&r.RunsPerSec, row.RunsPerSec)
			addTo(&r.CPUPercent, row.CPUPercent)
			addTo(&r.SampledCPUPercent, row.SampledCPUPercent)
		}
	})
	users, progOwners := q.Sampler.MapUsers()
	for _, m := range q.Maps.Last().Maps {
		r := t.row(mapwatch.Owners(m.Owners, users[m.Info.ID], progOwners, m.Pin))
		r.Present = true
		r.Maps++
		r.MapBytes += m.Info.Memlock
	}
	return t.sorted()
}

// OwnersOver charges what happened in [since, until] to owners: each
// program instance's runs and run time over the window (from its first
// stored sample when it loaded inside the window, whose counters count
// from its load), and each map's last memory reading in the window. The
// owners are those recorded when each program and map first appeared, so
// an owner that has exited keeps its row.
func (q *Query) OwnersOver(since, until time.Time) ([]api.OwnerRow, error) {
	t := ownerTally{}
	progs, err := q.Store.Programs()
	if err != nil {
		return nil, err
	}
	window := until.Sub(since)
	for _, rec := range progs {
		if rec.FirstSeen.After(until) || (!rec.UnloadedAt.IsZero() && rec.UnloadedAt.Before(since)) {
			continue
		}
		var meta collectors.Meta
		if len(rec.Meta) > 0 {
			if err := json.Unmarshal(rec.Meta, &meta); err != nil {
				return nil, fmt.Errorf("program %d metadata: %w", rec.ID, err)
			}
		}
		points, err := q.Store.Series(rec.Key, since, until)
		if err != nil {
			return nil, err
		}
		r := t.row(meta.Owners)
		r.Programs++
		r.Present = r.Present || rec.Loaded()
		if len(points) == 0 {
			continue
		}
		first, last := points[0].Values, points[len(points)-1].Values
		if !rec.FirstSeen.Before(since) {
			first = [3]uint64{} // loaded in the window: counters start at 0
		}
		r.RunTimeNs += last[store.ColRunTimeNs] - first[store.ColRunTimeNs]
		r.RunCnt += last[store.ColRunCnt] - first[store.ColRunCnt]
		r.RecursionMisses += last[store.ColRecursionMisses] - first[store.ColRecursionMisses]
	}
	for _, r := range t {
		r.RunsPerSec = api.Optional(api.PerSecond(float64(r.RunCnt), window))
		r.CPUPercent = api.Optional(api.CPUPercent(float64(r.RunTimeNs), window))
	}
	maps, err := q.Store.Maps()
	if err != nil {
		return nil, err
	}
	for _, rec := range maps {
		if rec.FirstSeen.After(until) || (!rec.GoneAt.IsZero() && rec.GoneAt.Before(since)) {
			continue
		}
		var owners []collectors.Owner
		if len(rec.Owners) > 0 {
			if err := json.Unmarshal(rec.Owners, &owners); err != nil {
				return nil, fmt.Errorf("map %d owners: %w", rec.ID, err)
			}
		}
		r := t.row(owners)
		r.Maps++
		r.Present = r.Present || rec.GoneAt.IsZero()
		points, err := q.Store.MapSeries(rec.Key, since, until)
		if err != nil {
			return nil, err
		}
		if len(points) > 0 {
			r.MapBytes += points[len(points)-1].Memlock
		}
	}
	return t.sorted(), nil
}
