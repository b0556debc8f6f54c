package api

import (
	"net/url"
	"time"
)

// Map is one map in GET /v1/maps. JSON names follow bpftool's `map show
// -j` where bpftool has the field.
type Map struct {
	ID         uint32 `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Flags      uint32 `json:"flags"`
	KeySize    uint32 `json:"bytes_key"`
	ValueSize  uint32 `json:"bytes_value"`
	MaxEntries uint32 `json:"max_entries"`
	// MemoryBytes is the kernel's figure, the memlock `bpftool map show`
	// prints.
	MemoryBytes uint64 `json:"bytes_memlock"`
	// Entries and FillPercent are absent where the map type has no fill
	// level (arrays are always full; rings and storage have no slots).
	Entries     *int64   `json:"entries,omitempty"`
	FillPercent *float64 `json:"fill_percent,omitempty"`
	// Counted is how entries were counted: "kernel" (the kernel's own
	// count, bpf_map_sum_elem_count) or "walk" (get-next-key over the
	// keys). Partial: the walk stopped at the reading's key budget, so
	// Entries is a lower bound.
	Counted string `json:"counted,omitempty"`
	Partial bool   `json:"partial,omitempty"`
	WalkNs  int64  `json:"walk_ns,omitempty"`
	// Programs are the loaded programs that use the map.
	Programs []uint32 `json:"programs"`
	// Owners hold the map: the processes with a fd of it, and the owners
	// of the programs that use it.
	Owners    []Owner   `json:"pids,omitempty"`
	Present   bool      `json:"present"`
	FirstSeen time.Time `json:"first_seen,omitzero"`
	GoneAt    time.Time `json:"gone_at,omitzero"`
	ReadAt    time.Time `json:"read_at,omitzero"`
	BootID    string    `json:"boot_id,omitempty"`
}

// MapsCost is what the last reading of every map took.
type MapsCost struct {
	Maps int `json:"maps"`
	// TookMs is the whole reading (every map opened, described, its
	// memlock read, walked where it is walked, closed); CountMs the
	// iterator pass that counted the hash family; WalkMs the key walks,
	// over Walked keys; OwnersMs the /proc scan for holders.
	TookMs   float64 `json:"took_ms"`
	CountMs  float64 `json:"count_ms"`
	WalkMs   float64 `json:"walk_ms"`
	Walked   int     `json:"walked"`
	OwnersMs float64 `json:"owners_ms"`
}

// Maps is GET /v1/maps.
type Maps struct {
	ReadAt  time.Time `json:"read_at,omitzero"`
	EveryMs int64     `json:"every_ms"`
	// Counting says how entries are counted on this host.
	Counting string   `json:"counting"`
	Cost     MapsCost `json:"cost"`
	Maps     []Map    `json:"maps"`
}

// MapPoint is one stored reading of a map.
type MapPoint struct {
	Time        time.Time `json:"time"`
	MemoryBytes uint64    `json:"bytes_memlock"`
	Entries     *int64    `json:"entries,omitempty"`
	FillPercent *float64  `json:"fill_percent,omitempty"`
}

// MapDetail is GET /v1/maps/{map}: the map and its readings between since
// and until.
type MapDetail struct {
	Map
	Since  time.Time  `json:"since"`
	Until  time.Time  `json:"until"`
	Points []MapPoint `json:"points"`
}

// Fill is entries as a percent of max entries, nil where either is
// missing.
func Fill(entries *int64, maxEntries uint32) *float64 {
	if entries == nil || maxEntries == 0 {
		return nil
	}
	f := float64(*entries) * 100 / float64(maxEntries)
	return &f
}

// Maps lists the maps of the last reading; with all, every stored map too.
func (c *Client) Maps(all bool) (Maps, error) {
	q := url.Values{}
	if all {
		q.Set("all", "true")
	}
	var m Maps
	return m, c.get("maps", q, &m)
}

// Map returns one map (an id, or a name when unique) and its readings
// between since and until.
func (c *Client) Map(ref string, since, until time.Time) (MapDetail, error) {
	var d MapDetail
	return d, c.get("maps/"+url.PathEscape(ref), timeRange(since, until), &d)
}
