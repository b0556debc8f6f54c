package api

import "time"

// Mechanisms behind per-program perf counters.
const (
	// MechanismExact names numbers counted by fentry/fexit programs around
	// every run of the target, in windows.
	MechanismExact = "exact"
	// MechanismSampled names numbers estimated from sampling perf events
	// over the continuous profile windows.
	MechanismSampled = "sampled"
)

// MechanismStatus says whether a counter mechanism (or one event of it)
// works here, and if not, why.
type MechanismStatus struct {
	Event     string `json:"event,omitempty"`
	Available bool   `json:"available"`
	// Reason is short and names the errno: "tracing programs refused
	// (EPERM)", "no PMU (ENOENT)".
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"` // the full error, or where numbers come from
	// Produces names the JSON fields the mechanism fills where available.
	Produces []string `json:"produces,omitempty"`
	// Sampled events: the latest window's rate in force (hardware events
	// are bounded and back off when the kernel throttles them), samples
	// taken, samples lost, throttle records, and the share of the window
	// the event was on the PMU when it was multiplexed (values are scaled
	// by its inverse).
	Hz           int      `json:"hz,omitempty"`
	Samples      int      `json:"samples,omitempty"`
	Lost         uint64   `json:"lost,omitempty"`
	Throttled    uint64   `json:"throttled,omitempty"`
	RunningShare *float64 `json:"running_share,omitempty"`
}

// CountersStatus is the counters part of GET /v1/status: each mechanism,
// available or why not, and what is being counted.
type CountersStatus struct {
	Exact   MechanismStatus   `json:"exact"`
	Sampled []MechanismStatus `json:"sampled"` // one per event
	// Events are what exact windows count: the hardware events where a
	// PMU exists, cpu-clock (ns) where none does.
	Events   []string `json:"events,omitempty"`
	WindowMs int64    `json:"window_ms"`
	EveryMs  int64    `json:"every_ms"`
	Max      int      `json:"max"`
	Programs []string `json:"programs,omitempty"` // --counters.programs
	Targets  int      `json:"targets"`            // enabled or matched, within Max
	Waiting  int      `json:"waiting,omitempty"`  // matched beyond Max
	Failed   int      `json:"failed,omitempty"`   // cannot be counted (see counters list)
	Counting int      `json:"counting"`           // windows open now
	// Unsupported are the events this machine's PMU does not count, with
	// why ("not supported by this PMU (ENOENT)"): absent from every
	// window, never shown as 0. Only where a PMU exists.
	Unsupported map[string]string `json:"unsupported,omitempty"`
}

// PerfCounters is what perf counters measured of one program over one
// counting window: per-run figures and the mechanism that produced them.
// A nil figure cannot be had (event not counted here, no counted run).
type PerfCounters struct {
	// Mechanism is MechanismExact (fentry/fexit around every run) or
	// MechanismSampled (samples × period of sampling perf events, per
	// continuous profile window).
	Mechanism   string    `json:"mechanism"`
	Events      []string  `json:"events"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end,omitzero"`
	Stopped     string    `json:"stopped,omitempty"` // why the window ended
	// CountedRuns are the runs the totals cover; Entries are the runs the
	// entry probe saw (zero in history, which keeps only counted runs).
	// For sampled windows, CountedRuns are the runs bpf_stats counted in
	// the window (0 for a tail-call target: the kernel charges the entry
	// program).
	CountedRuns uint64 `json:"counted_runs"`
	Entries     uint64 `json:"entries,omitempty"`
	// Sampled only: the cpu-clock samples that landed in the program, and
	// each sampled event's estimated total in the window (samples × period;
	// cpu-clock in ns), present even when the program counted no run.
	Samples uint64             `json:"samples,omitempty"`
	Totals  map[string]float64 `json:"totals,omitempty"`

	CPUClockNsPerRun           *float64 `json:"cpu_clock_ns_per_run,omitempty"`
	CyclesPerRun               *float64 `json:"cycles_per_run,omitempty"`
	InstructionsPerRun         *float64 `json:"instructions_per_run,omitempty"`
	IPC                        *float64 `json:"ipc,omitempty"`
	LLCMissesPerRun            *float64 `json:"llc_misses_per_run,omitempty"`
	LLCMissesPer1kInstructions *float64 `json:"llc_misses_per_1k_instructions,omitempty"`
}

// CounterTarget is one program in GET /v1/counters, and the answer to
// POST /v1/counters/enable and /disable.
type CounterTarget struct {
	ID     uint32 `json:"id"`
	Name   string `json:"name"`
	Source string `json:"source"` // "enabled" (counters enable) or "--counters.programs"
	// State: "counting" (a window is open), "idle" (between windows),
	// "waiting" (matched beyond --counters.max), "failed" (see Reason),
	// "disabled" (the answer to disable).
	State    string        `json:"state"`
	Reason   string        `json:"reason,omitempty"`
	WindowMs int64         `json:"window_ms"`
	Windows  int           `json:"windows"` // finished windows since the daemon started
	Next     time.Time     `json:"next_window,omitzero"`
	Last     *PerfCounters `json:"last,omitempty"` // the last finished window
}

// CountersList is GET /v1/counters.
type CountersList struct {
	Status  CountersStatus  `json:"status"`
	Targets []CounterTarget `json:"targets"`
}

// CounterHistoryPoint is one finished window of a program in GET
// /v1/counters/history.
type CounterHistoryPoint struct {
	ID uint32 `json:"id"`
	PerfCounters
}

// CounterHistory is GET /v1/counters/history.
type CounterHistory struct {
	Program string                `json:"program"`
	Since   time.Time             `json:"since"`
	Until   time.Time             `json:"until"`
	Points  []CounterHistoryPoint `json:"points"`
}
