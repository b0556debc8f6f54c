package daemon

import (
	"encoding/json"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/store"
)

// The /v1 API's JSON documents. Kernel fields keep the kernel's names.

// Status is GET /v1/status.
type Status struct {
	Version        string    `json:"version"`
	PID            int       `json:"pid"`
	StartedAt      time.Time `json:"started_at"`
	UptimeSeconds  float64   `json:"uptime_seconds"`
	BootID         string    `json:"boot_id"`
	StatsMode      string    `json:"stats_mode"`
	StatsDetail    string    `json:"stats_detail"`
	IntervalMs     int64     `json:"interval_ms"`
	ProgramsLoaded int       `json:"programs_loaded"`
	ProgramsSeen   int       `json:"programs_seen"` // instances in the store, loaded or not
	StorePath      string    `json:"store_path"`
	StoreBytes     int64     `json:"store_bytes"`
	LastSample     time.Time `json:"last_sample,omitzero"`
	LastSweepMs    float64   `json:"last_sweep_ms"`
	LastWriteMs    float64   `json:"last_write_ms"`
	LastError      string    `json:"last_error,omitempty"`
	// Programs the last sweep skipped because the kernel refused to open
	// them (a security module can deny single programs), and why.
	SkippedPrograms int    `json:"skipped_programs,omitempty"`
	SkipReason      string `json:"skip_reason,omitempty"`
	// The daemon's own cost: CPU over the last minute, relative to one CPU.
	CPUPercent float64 `json:"cpu_percent"`
	RSSBytes   int64   `json:"rss_bytes"`
	// Host and kernel, for views of a daemon reached over a socket.
	Hostname      string `json:"hostname"`
	KernelRelease string `json:"kernel_release"`

	Profiling *ProfilingStatus `json:"profiling,omitempty"`
	Counters  *CountersStatus  `json:"counters,omitempty"`
}

// ProgRow is one program in GET /v1/progs.
type ProgRow struct {
	ID     uint32 `json:"id"`
	Type   string `json:"type"`
	Name   string `json:"name"`
	Tag    string `json:"tag"`
	Loaded bool   `json:"loaded"`
	Own    bool   `json:"own,omitempty"` // held by bpfperfd itself
	Counters
	Rates
	AvgNsSinceLoad *float64  `json:"avg_ns_per_run_since_load,omitempty"`
	LoadedAt       time.Time `json:"loaded_at,omitzero"`
	UnloadedAt     time.Time `json:"unloaded_at,omitzero"`
	BootID         string    `json:"boot_id"`
	LastSample     time.Time `json:"last_sample,omitzero"`
	// Who holds the program and where it is attached, as last read
	// (refreshed every 30 s and when programs appear).
	Owners []collectors.Owner       `json:"pids,omitempty"`
	Attach []collectors.AttachPoint `json:"attach,omitempty"`
	// Filled only while CPU profiling runs: the program's share of sampled
	// CPU time, which also covers its tail-call targets.
	SampledCPUPercent *float64 `json:"sampled_cpu_percent,omitempty"`
	// Filled only while perf counters run for the program.
	CyclesPerRun       *float64 `json:"cycles_per_run,omitempty"`
	InstructionsPerRun *float64 `json:"instructions_per_run,omitempty"`
	IPC                *float64 `json:"ipc,omitempty"`
	LLCMissesPerRun    *float64 `json:"llc_misses_per_run,omitempty"`
	// The last counting window's per-run figures and the mechanism behind
	// them (counters.go).
	PerfCounters *PerfCounters `json:"perf_counters,omitempty"`
}

// ProgCounters is one program in GET /v1/progs?fields=counters: only what
// changes every tick, for views that refresh often (bpfperf top) and take
// the rest from a full listing now and then.
type ProgCounters struct {
	ID  uint32 `json:"id"`
	Tag string `json:"tag"`
	Counters
	LastSampleMs int64 `json:"last_sample_ms"` // unix milliseconds
}

// ProgDetail is GET /v1/progs/{prog}: the row plus all metadata.
type ProgDetail struct {
	ProgRow
	Meta collectors.Meta `json:"meta"`
}

// HistoryPoint is one point of GET /v1/history.
type HistoryPoint struct {
	Time time.Time `json:"time"`
	ID   uint32    `json:"id"` // program id of the instance this point belongs to
	Counters
	Rates
	// Reload marks the first point of a new instance (the program was
	// reloaded); its rates are absent because counters restart.
	Reload bool `json:"reload,omitempty"`
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

// Events is GET /v1/events.
type Events struct {
	Since  time.Time     `json:"since"`
	Until  time.Time     `json:"until"`
	Events []store.Event `json:"events"`
}

// apiError is the body of every non-2xx answer.
type apiError struct {
	Error string `json:"error"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
