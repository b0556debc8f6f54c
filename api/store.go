package api

import (
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// StoreStats is GET /v1/store/stats: what the store holds (store.Stats).
type StoreStats = store.Stats

// GroupStats is one resolution's share of the store (store.GroupStats).
type GroupStats = store.GroupStats

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
