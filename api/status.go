package api

import "time"

// Status is GET /v1/status.
type Status struct {
	Version       string    `json:"version"`
	PID           int       `json:"pid"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	BootID        string    `json:"boot_id"`
	StatsMode     string    `json:"stats_mode"`
	StatsDetail   string    `json:"stats_detail"`
	// StatsDuty says how much of each interval stats are on, when less
	// than all of it (--stats.duty).
	StatsDuty      string `json:"stats_duty,omitempty"`
	IntervalMs     int64  `json:"interval_ms"`
	ProgramsLoaded int    `json:"programs_loaded"`
	ProgramsSeen   int    `json:"programs_seen"` // instances in the store, loaded or not
	StorePath      string `json:"store_path"`
	StoreBytes     int64  `json:"store_bytes"`
	// StoreDamaged says what was found damaged in the store while
	// running; nothing more is written to it. Empty while it is sound.
	StoreDamaged string `json:"store_damaged,omitempty"`
	// StoreGone says the store's path no longer names the file the
	// daemon has open (removed or replaced): what it writes is lost
	// when it stops.
	StoreGone string `json:"store_gone,omitempty"`
	// StoreUnansweredSeconds is how long a read of the store has waited,
	// when it did not answer in time: a write is stuck in the kernel (a
	// frozen or hung disk). ProgramsSeen and the stored profiles are then
	// the last ones counted.
	StoreUnansweredSeconds float64   `json:"store_unanswered_seconds,omitempty"`
	LastSample             time.Time `json:"last_sample,omitzero"`
	LastSweepMs            float64   `json:"last_sweep_ms"`
	// LastSweepRead is how many programs the last sweep read: all of
	// them with the fd sweep, and with the iterator only those that are
	// new or whose counters moved (the rest are as last read), but all
	// of them when one went away.
	LastSweepRead int     `json:"last_sweep_read"`
	LastWriteMs   float64 `json:"last_write_ms"`
	// Sweep is how programs are read each tick: "iter" (one BPF iterator
	// read) or "fd" (open, describe and close each program); SweepDetail
	// says why, and when the iterator was last proved against
	// OBJ_GET_INFO_BY_FD.
	Sweep       string `json:"sweep,omitempty"`
	SweepDetail string `json:"sweep_detail,omitempty"`
	// Holders is how owner processes of programs and maps are found: one
	// pass of a task_file iterator, or a walk of /proc and why.
	Holders string `json:"holders,omitempty"`
	// Loaders is how each program's loader is known: the kernel's load
	// records followed (and any lost), or why not.
	Loaders string `json:"loaders,omitempty"`
	// Pods is where containers' Kubernetes names come from: the CRI
	// socket and what it lists, or why there are none (no socket, one
	// that does not answer: containers go by pod uid and container id).
	Pods string `json:"pods,omitempty"`
	// The iterator's own run time (its bpf_stats), the collection cost paid
	// in the kernel: the last sweep's, and since it loaded as a share of
	// one CPU.
	SweepBPFMs         float64 `json:"sweep_bpf_ms,omitempty"`
	SweepBPFCPUPercent float64 `json:"sweep_bpf_cpu_percent,omitempty"`
	LastError          string  `json:"last_error,omitempty"`
	// Programs the last sweep skipped because the kernel refused to open
	// them (a security module can deny single programs), and why.
	SkippedPrograms int    `json:"skipped_programs,omitempty"`
	SkipReason      string `json:"skip_reason,omitempty"`
	// The daemon's own cost: CPU over the last minute, relative to one CPU.
	CPUPercent float64 `json:"cpu_percent"`
	RSSBytes   int64   `json:"rss_bytes"`
	// HeapLiveBytes is the Go heap the last garbage collection found in
	// use: what the daemon keeps, without the garbage and freed pages
	// that come and go in RSS.
	HeapLiveBytes int64 `json:"heap_live_bytes"`
	// Host and kernel, for views of a daemon reached over a socket.
	Hostname      string `json:"hostname"`
	KernelRelease string `json:"kernel_release"`

	// StatsCost is what watching costs every program run.
	StatsCost *StatsCost `json:"stats_cost,omitempty"`

	Profiling *ProfilingStatus `json:"profiling,omitempty"`
	Counters  *CountersStatus  `json:"counters,omitempty"`
	Latency   *LatencyStatus   `json:"latency,omitempty"`
}

// ProfilingStatus is the profiling part of GET /v1/status.
type ProfilingStatus struct {
	Continuous   bool   `json:"continuous"`
	Event        string `json:"event"`
	Hz           int    `json:"hz"`
	EveryMs      int64  `json:"every_ms,omitempty"`
	WindowMs     int64  `json:"window_ms,omitempty"`
	MaxCaptureMs int64  `json:"max_capture_ms"`
	RetentionMs  int64  `json:"retention_ms"`
	// ProgramsKnown is how many programs the symbolizer holds JIT and line
	// information for.
	ProgramsKnown int `json:"programs_known"`
	// The latest continuous window.
	LastProfileID      string    `json:"last_profile_id,omitempty"`
	LastProfileStart   time.Time `json:"last_profile_start,omitzero"`
	LastProfileSamples int64     `json:"last_profile_samples"`
	LastProfileBytes   int       `json:"last_profile_bytes"`
	// LastBuildMs is from the window's end to its profile built (symbolized).
	LastBuildMs    float64 `json:"last_build_ms"`
	Windows        int64   `json:"windows"`
	CaptureRunning bool    `json:"capture_running"`
	StoredProfiles int     `json:"stored_profiles"`
	StoredBytes    int64   `json:"stored_bytes"`
	LastError      string  `json:"last_error,omitempty"`
	// Filter is the kernel filter on the main event's samples, once a
	// continuous window ended.
	Filter *ProfilingFilter `json:"filter,omitempty"`
	// Drains are the main event's, once a continuous window ended.
	Drains *ProfilingDrains `json:"drains,omitempty"`
}

// ProfilingFilter is the kernel filter on the continuous profiler's
// samples (profile/kfilter): whether the latest window was filtered and
// why not, and the samples it passed and dropped since the daemon
// started (before the filter, every sample reached the daemon).
type ProfilingFilter struct {
	On      bool   `json:"on"`
	Reason  string `json:"reason,omitempty"` // why not on
	Passed  uint64 `json:"passed"`
	Dropped uint64 `json:"dropped"`
	Pages   int    `json:"pages"` // 4 KiB pages of BPF and hook code it passes
}

// ProfilingDrains are how often the continuous profiler's captures woke
// to empty their rings before a window's end, since the daemon started:
// on their timer (each few ms of a capture that must poll: no kernel
// filter, or a tracing program that may sample itself) or because a
// ring filled to its watermark. A filtered capture on an idle host wakes
// for neither.
type ProfilingDrains struct {
	Timed uint64 `json:"timed"`
	Full  uint64 `json:"full"`
}

// StatsCost is what bpf_stats costs this host: measured at the daemon's
// start with a calibration program test-run with stats off and on (where
// nothing else kept stats on), and that per-run cost times the runs/s of
// every program.
type StatsCost struct {
	Measured    bool      `json:"measured"`
	MeasuredAt  time.Time `json:"measured_at,omitzero"`
	NsPerRun    float64   `json:"ns_per_run,omitempty"`
	OffNsPerRun float64   `json:"off_ns_per_run,omitempty"`
	OnNsPerRun  float64   `json:"on_ns_per_run,omitempty"`
	// WallClockNsPerRun is the same cost timed by the wall clock around
	// the same test runs, the second mechanism; SpreadNs the
	// interquartile range of the measured pairs' own costs; Pairs how
	// many stats-off/on pairs it took; Settled whether the figure settled
	// and the two clocks agreed (false: measured on a host too noisy).
	WallClockNsPerRun float64   `json:"wall_clock_ns_per_run,omitempty"`
	SpreadNs          []float64 `json:"spread_ns,omitempty"`
	Pairs             int       `json:"pairs,omitempty"`
	Settled           bool      `json:"settled"`
	// Detail says how it was measured, or why it was not.
	Detail string `json:"detail"`
	// RunsPerSec is every program's runs over the last sweep, summed;
	// CPUPercent is RunsPerSec × NsPerRun as a share of one CPU.
	RunsPerSec float64  `json:"runs_per_sec"`
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
	// DutyPercent is the share of each interval stats are on now: 100
	// keeps every figure exact; below, runs and run time are scaled from
	// that share (estimates). BudgetPercent is --stats.budget, the % of
	// one CPU stats may cost the programs (absent without a budget), and
	// Budget says in words how it is kept, or why it is off.
	DutyPercent   int      `json:"duty_percent"`
	BudgetPercent *float64 `json:"budget_percent,omitempty"`
	Budget        string   `json:"budget"`
	// PaidCPUSecondsPerSec is what stats cost the programs now, at the
	// share in force: RunsPerSec × NsPerRun × DutyPercent/100, in CPU
	// seconds per second.
	PaidCPUSecondsPerSec *float64 `json:"paid_cpu_seconds_per_sec,omitempty"`
}
