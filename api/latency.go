package api

import "time"

// LatencyWindow is one latency window of a program: every run in it timed
// by an fentry/fexit pair around the program, the distribution of the
// runs' times. Figures are in ns with the timing floor (FloorNs, what
// timing adds inside each measured interval) taken off; a quantile is
// within ErrorPct of the true value, to the resolution of the buckets.
type LatencyWindow struct {
	ID       uint32    `json:"id"`
	Name     string    `json:"name"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Duration float64   `json:"duration_s"`
	// Stopped says why the window ended: "window ended", "target released
	// by its owner", "stopped".
	Stopped string `json:"stopped,omitempty"`
	// Runs are the runs timed; Untimed those left out (a run already under
	// way when the window opened, runs nested more than 4 deep on a CPU).
	Runs    uint64  `json:"runs"`
	Untimed uint64  `json:"untimed,omitempty"`
	MeanNs  float64 `json:"mean_ns"`
	P50Ns   float64 `json:"p50_ns"`
	P90Ns   float64 `json:"p90_ns"`
	P99Ns   float64 `json:"p99_ns"`
	P999Ns  float64 `json:"p999_ns"`
	MaxNs   float64 `json:"max_ns"`
	// ErrorPct bounds a quantile's error relative to its value (bucket
	// resolution), in %.
	ErrorPct float64 `json:"error_pct"`
	FloorNs  float64 `json:"floor_ns"`
	// AddedNsPerRun is what timing added to each run while the window was
	// open: bpf_stats' run time of the program grew by about this much per
	// run more than the program's own (calibrated on an empty program; 0
	// where stats were off and nothing was added to them).
	AddedNsPerRun float64 `json:"added_ns_per_run"`
	// Buckets are the runs by power of two of their raw time (the floor
	// not taken off), shortest first, empty ones left out.
	Buckets []LatencyBucket `json:"buckets"`
	// PerRun is a perf event counted per run beside the time (cycles by
	// default, where the CPU has a PMU), nil where the window counted
	// none; PerRunUnavailable says why not, on the answer to the request
	// that opened the window ("cycles: no hardware PMU").
	PerRun            *LatencyEventCounts `json:"per_run,omitempty"`
	PerRunUnavailable string              `json:"per_run_unavailable,omitempty"`
}

// LatencyEventCounts is one perf event's count per run over a window,
// with its floor (the count of an empty run's timing) taken off, each
// quantile within LatencyWindow.ErrorPct like the time's.
type LatencyEventCounts struct {
	Event string `json:"event"`
	// Runs are the runs counted; Missed timed runs it could not count
	// (the event not scheduled on that CPU at the time).
	Runs   uint64  `json:"runs"`
	Missed uint64  `json:"missed,omitempty"`
	Mean   float64 `json:"mean"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p999"`
	Max    float64 `json:"max"`
	Floor  float64 `json:"floor"`
}

// LatencyBucket is the runs whose raw time was in [LoNs, HiNs); the last
// bucket's HiNs is 0: open above.
type LatencyBucket struct {
	LoNs uint64 `json:"lo_ns"`
	HiNs uint64 `json:"hi_ns"`
	Runs uint64 `json:"runs"`
}

// LatencyHistory is GET /v1/latency/history: the stored windows of every
// instance PROG names (its reloads too), oldest first.
type LatencyHistory struct {
	Program string          `json:"program"`
	Since   time.Time       `json:"since"`
	Until   time.Time       `json:"until"`
	Windows []LatencyWindow `json:"windows"`
}

// LatencyStatus is the latency part of GET /v1/status.
type LatencyStatus struct {
	// Available is false where the kernel refuses tracing programs;
	// Reason says why in a few words.
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// FloorNs and AddedNsPerRun are the calibration in force (0 before one).
	FloorNs       float64  `json:"floor_ns"`
	AddedNsPerRun float64  `json:"added_ns_per_run"`
	WindowMs      int64    `json:"window_ms"`
	EveryMs       int64    `json:"every_ms"`
	Max           int      `json:"max"`
	Programs      []string `json:"programs,omitempty"` // --latency.programs
	Timing        int      `json:"timing"`             // windows open now
	Windows       int64    `json:"windows"`            // windows stored since the daemon started
	LastError     string   `json:"last_error,omitempty"`
	// Event is the perf event counted per run ("cycles", or "none");
	// EventFloor its calibrated count for an empty run, and
	// EventUnavailable why it is not counted here ("no hardware PMU").
	Event            string  `json:"event"`
	EventFloor       float64 `json:"event_floor"`
	EventUnavailable string  `json:"event_unavailable,omitempty"`
}
