package api

import "time"

// StoreStats is GET /v1/store/stats: what the store holds.
type StoreStats struct {
	Path      string                `json:"path"`
	FileBytes int64                 `json:"file_bytes"`
	Schema    int                   `json:"schema"`
	Programs  int                   `json:"programs"`
	Events    int                   `json:"events"`
	Groups    map[string]GroupStats `json:"resolutions"` // "raw", "1m0s", "1h0m0s", "counters"
	Oldest    time.Time             `json:"oldest_sample,omitzero"`
	Newest    time.Time             `json:"newest_sample,omitzero"`
}

// GroupStats is one resolution's share of the store.
type GroupStats struct {
	Series  int   `json:"series"`
	Chunks  int   `json:"chunks"`
	Samples int64 `json:"samples"`
	Bytes   int64 `json:"bytes"` // chunk payload, without bbolt's keys and pages
}

// BytesPerSample is chunk bytes per (series, counter, timestamp) sample,
// for samples of columns counters; 0 without samples.
func (g GroupStats) BytesPerSample(columns int) float64 {
	if g.Samples == 0 || columns <= 0 {
		return 0
	}
	return float64(g.Bytes) / float64(g.Samples*int64(columns))
}

// StoreCheck is GET /v1/store/check.
type StoreCheck struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

// ExportFields are the columns of GET /v1/export?format=csv, in order.
var ExportFields = []string{"time", "boot_id", "id", "name", "type", "tag", "run_cnt", "run_time_ns", "recursion_misses"}

// ExportRecord is one line of GET /v1/export?format=jsonl.
type ExportRecord struct {
	Time   time.Time `json:"time"`
	BootID string    `json:"boot_id"`
	ID     uint32    `json:"id"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Tag    string    `json:"tag"`
	Counters
}

// TrailerExportError carries an error that stopped an export after its
// first bytes, when the status could no longer say so.
const TrailerExportError = "Bpfperf-Export-Error"
