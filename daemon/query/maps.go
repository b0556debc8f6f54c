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
	"github.com/bpfperf/bpfperf/store"
)

// MapsView is GET /v1/maps: every map of the last reading, with all the
// gone ones the store still has too; by memory, largest first.
func (q *Query) MapsView(all bool) (api.Maps, error) {
	users, progOwners := q.Sampler.MapUsers()
	last := q.Maps.Last()
	out := api.Maps{
		ReadAt: last.At, EveryMs: q.MapsEvery.Milliseconds(), Counting: last.Counting, Maps: []api.Map{},
		Cost: api.MapsCost{
			Maps: last.Cost.Maps, TookMs: ms(last.Cost.Took), CountMs: ms(last.Cost.Counts), WalkMs: ms(last.Cost.Walk),
			Walked: last.Cost.Walked, OwnersMs: ms(last.OwnersTook),
		},
	}
	present := map[store.InstanceKey]bool{}
	for _, m := range last.Maps {
		out.Maps = append(out.Maps, liveMap(m, users[m.Info.ID], progOwners))
		present[m.Key] = true
	}
	recs, err := q.Store.Maps()
	if err != nil {
		return out, err
	}
	for _, rec := range recs {
		if present[rec.Key] {
			continue
		}
		if all {
			out.Maps = append(out.Maps, storedMap(rec))
		}
	}
	firstSeen := map[store.InstanceKey]time.Time{}
	for _, rec := range recs {
		firstSeen[rec.Key] = rec.FirstSeen
	}
	for i := range out.Maps {
		if out.Maps[i].Present {
			out.Maps[i].FirstSeen = firstSeen[store.InstanceKey{Boot: q.Boot, ID: out.Maps[i].ID}]
		}
	}
	sort.SliceStable(out.Maps, func(i, j int) bool {
		a, b := out.Maps[i], out.Maps[j]
		if a.Present != b.Present {
			return a.Present
		}
		if a.MemoryBytes != b.MemoryBytes {
			return a.MemoryBytes > b.MemoryBytes
		}
		return a.ID < b.ID
	})
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// liveMap is the API row of a map of the last reading. Its owners are the
// processes holding it and those holding a program that uses it.
func liveMap(m mapwatch.Map, progs []uint32, progOwners map[uint32][]collectors.Owner) api.Map {
	i := m.Info
	row := api.Map{
		ID: i.ID, Name: i.Name, Type: i.Type, Flags: i.Flags, KeySize: i.KeySize, ValueSize: i.ValueSize,
		MaxEntries: i.MaxEntries, MemoryBytes: i.Memlock, Counted: i.Counted, Partial: i.Partial,
		WalkNs: i.WalkTook.Nanoseconds(), Programs: NonNil(progs), Present: true, ReadAt: m.At,
	}
	if i.Entries >= 0 {
		n := i.Entries
		row.Entries, row.FillPercent = &n, api.Fill(&n, i.MaxEntries)
	}
	row.Owners = mapwatch.Owners(m.Owners, progs, progOwners, m.Pin)
	return row
}

// storedMap is the API row of a map the store remembers.
func storedMap(rec store.MapRecord) api.Map {
	row := api.Map{
		ID: rec.ID, Name: rec.Name, Type: rec.Type, KeySize: rec.KeySize, ValueSize: rec.ValueSize,
		MaxEntries: rec.MaxEntries, Programs: []uint32{}, FirstSeen: rec.FirstSeen, GoneAt: rec.GoneAt, BootID: rec.BootID,
	}
	var owners []collectors.Owner
	if json.Unmarshal(rec.Owners, &owners) == nil {
		row.Owners = owners
	}
	return row
}

// resolveMap finds a map by id or name: present maps first, then the
// store's (the newest instance).
func (q *Query) resolveMap(ref string) (api.Map, store.InstanceKey, error) {
	maps, err := q.MapsView(true)
	if err != nil {
		return api.Map{}, store.InstanceKey{}, err
	}
	id, idErr := strconv.ParseUint(ref, 10, 32)
	var found []api.Map
	for _, m := range maps.Maps {
		if (idErr == nil && m.ID == uint32(id)) || (idErr != nil && m.Name == ref) {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		return api.Map{}, store.InstanceKey{}, fmt.Errorf("%w %q (bpfperf maps --all lists them)", errs.UnknownMap, ref)
	}
	// Present ones sort first; among gone ones take the newest.
	best := found[0]
	if !best.Present {
		for _, m := range found[1:] {
			if m.FirstSeen.After(best.FirstSeen) {
				best = m
			}
		}
	} else if idErr != nil && len(found) > 1 && found[1].Present {
		return api.Map{}, store.InstanceKey{}, fmt.Errorf("%w: %d loaded maps are named %q: use an id", errs.AmbiguousMap, countPresent(found), ref)
	}
	key := store.InstanceKey{Boot: q.Boot, ID: best.ID}
	if !best.Present {
		boot, err := q.Store.Boot(best.BootID)
		if err != nil {
			return api.Map{}, store.InstanceKey{}, err
		}
		key.Boot = boot
	}
	return best, key, nil
}

func countPresent(maps []api.Map) int {
	n := 0
	for _, m := range maps {
		if m.Present {
			n++
		}
	}
	return n
}

// MapDetail is one map (an id, or a name when unique) and its readings
// between since and until.
func (q *Query) MapDetail(ref string, since, until time.Time) (api.MapDetail, error) {
	m, key, err := q.resolveMap(ref)
	if err != nil {
		return api.MapDetail{}, err
	}
	points, err := q.Store.MapSeries(key, since, until)
	if err != nil {
		return api.MapDetail{}, err
	}
	d := api.MapDetail{Map: m, Since: since, Until: until, Points: make([]api.MapPoint, 0, len(points))}
	for _, p := range points {
		pt := api.MapPoint{Time: p.Time, MemoryBytes: p.Memlock}
		if p.Entries >= 0 {
			n := p.Entries
			pt.Entries, pt.FillPercent = &n, api.Fill(&n, m.MaxEntries)
		}
		d.Points = append(d.Points, pt)
	}
	return d, nil
}
