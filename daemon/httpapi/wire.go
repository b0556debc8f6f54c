package httpapi

import (
	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/store"
)

// The daemon's domain types become the API's here, at the edge, and
// nowhere else. Where a domain type has the same fields as its API twin a
// Go conversion does it, so a field added on one side only stops the
// build here instead of vanishing from the wire.

// pointCounters are a stored sample's cumulative counters.
func pointCounters(p store.Point) api.Counters {
	v := p.Values
	return api.Counters{RunTimeNs: v[store.ColRunTimeNs], RunCnt: v[store.ColRunCnt], RecursionMisses: v[store.ColRecursionMisses]}
}

// ptr is f as an optional API number.
func ptr(f float64) *float64 { return &f }

func apiMeta(m collectors.Meta) api.Meta {
	return api.Meta{
		ID: m.ID, Type: m.Type, TypeID: m.TypeID, Name: m.Name, KernelName: m.KernelName, Tag: m.Tag, GPLCompatible: m.GPLCompatible,
		LoadedAt: m.LoadedAt, UID: m.UID, BytesXlated: m.BytesXlated, BytesJited: m.BytesJited,
		BytesMemlock: m.BytesMemlock, MapIDs: m.MapIDs, BTFID: m.BTFID, VerifiedInsns: m.VerifiedInsns,
		Attach: apiAttach(m.Attach), Owners: apiOwners(m.Owners),
	}
}

func apiOwners(owners []collectors.Owner) []api.Owner {
	return convertAll(owners, func(o collectors.Owner) api.Owner { return api.Owner(o) })
}

func apiAttach(points []collectors.AttachPoint) []api.AttachPoint {
	return convertAll(points, func(p collectors.AttachPoint) api.AttachPoint { return api.AttachPoint(p) })
}

// apiEvents converts stored events; none is an empty list, not null.
func apiEvents(events []store.Event) []api.Event {
	return nonNil(convertAll(events, func(e store.Event) api.Event { return api.Event(e) }))
}

func apiBenchRun(r store.BenchRun) api.BenchRun { return api.BenchRun(r) }

// apiBenchRuns converts stored runs; none is an empty list, not null.
func apiBenchRuns(runs []store.BenchRun) []api.BenchRun {
	return nonNil(convertAll(runs, apiBenchRun))
}

// apiProfiles converts profile listings; none is an empty list, not null.
func apiProfiles(list []store.ProfileInfo) []api.ProfileInfo {
	return nonNil(convertAll(list, func(p store.ProfileInfo) api.ProfileInfo { return api.ProfileInfo(p) }))
}

func apiStoreStats(st store.Stats) api.StoreStats {
	out := api.StoreStats{
		Path: st.Path, FileBytes: st.FileBytes, Schema: st.Schema, Programs: st.Programs, Events: st.Events,
		Oldest: st.Oldest, Newest: st.Newest,
	}
	if st.Groups != nil {
		out.Groups = make(map[string]api.GroupStats, len(st.Groups))
		for name, g := range st.Groups {
			out.Groups[name] = api.GroupStats(g)
		}
	}
	return out
}

// convertAll converts each element; nil stays nil.
func convertAll[T, U any](in []T, convert func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = convert(v)
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
