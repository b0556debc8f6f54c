package api

import (
	"encoding/json"
	"time"
)

// HistoryPoint is one point of GET /v1/history.
type HistoryPoint struct {
	Time time.Time `json:"time"`
	ID   uint32    `json:"id"` // program id of the instance this point belongs to
	Counters
	Rates
	// Reload marks the first point of a new instance (the program was
	// reloaded); its rates are absent because counters restart.
	Reload bool `json:"reload,omitempty"`
	// Estimated marks a point stored while bpfperfd ran with stats on for
	// only part of each interval (--stats.duty): its counters and rates
	// are scaled from that part.
	Estimated bool `json:"estimated,omitempty"`
}

// History is GET /v1/history.
type History struct {
	Program string    `json:"program"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	StepMs  int64     `json:"step_ms,omitempty"`
	// Resolution is what the points were read from: "raw", "1m0s" or
	// "1h0m0s" rollups, the coarsest that still gives one point per step.
	Resolution string         `json:"resolution"`
	Points     []HistoryPoint `json:"points"`
}

// Event explains a change in the graphs.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // "loaded", "unloaded", "new_version", "stats_mode", "daemon_start", "daemon_stop", "bench_run"
	ID   uint32    `json:"id,omitempty"`
	Name string    `json:"name,omitempty"`
	Tag  string    `json:"tag,omitempty"`
	// Identity is the program's identity key (see ProgRow.Identity), on
	// events about a program whose identity is settled.
	Identity string `json:"identity,omitempty"`
	Detail   string `json:"detail,omitempty"`
	MapID    uint32 `json:"map_id,omitempty"` // map events: "map_fill", "map_leak"
	// Evidence of a finding (regression, improvement, shift): a Regression.
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// Events is GET /v1/events.
type Events struct {
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Events []Event   `json:"events"`
}
