package api

import (
	"time"

	"github.com/bpfperf/bpfperf/store"
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
	// Carried marks a point whose interval had stats off all through
	// (a duty cycle's parts gathered one interval in several): its
	// counters moved at the rates of stats' last on part, so its rates
	// repeat that part's, and check leaves it out.
	Carried bool `json:"carried,omitempty"`
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

// Event explains a change in the graphs (store.Event): a program loaded,
// unloaded or of a new version, the daemon started or stopped, a finding,
// a map filling up.
type Event = store.Event

// Events is GET /v1/events.
type Events struct {
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Events []Event   `json:"events"`
}
