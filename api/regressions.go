package api

import "time"

// Regression is a finding of regression detection: a program key's ns/run
// changed between two versions (regression, improvement) or within one
// (shift). It is the evidence of the event of the same kind.
type Regression struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"` // "regression", "improvement" or "shift"
	Time    time.Time `json:"time"` // when it was decided
	Program string    `json:"program"`
	Type    string    `json:"type"`
	// Identity is the program's identity key (ProgRow.Identity): the
	// program whose two versions were compared.
	Identity string `json:"identity"`
	ProgID   uint32 `json:"prog_id"` // the instance running the new version
	OldTag   string `json:"old_tag"`
	NewTag   string `json:"new_tag"`
	Windows
	Comparison
	// Tail compares the p99 of the latency windows (bpfperf latency,
	// --latency.programs) of the two versions, where each side has them.
	Tail *TailComparison `json:"tail,omitempty"`
	// By says what decided the finding: "mean" (the intervals' ns/run) or
	// "p99" (the tail, when the mean did not move by the minimum change or not significantly).
	By          string      `json:"by,omitempty"`
	Explanation Explanation `json:"explanation"`
}

// TailComparison is the p99 run time of a program's latency windows in the
// two windows of a finding: the median of each side's windows' p99 (the
// timing floor not taken off: the same on both sides), and their ratio.
type TailComparison struct {
	BeforeP99Ns   float64 `json:"before_p99_ns"`
	AfterP99Ns    float64 `json:"after_p99_ns"`
	Ratio         float64 `json:"ratio"`
	WindowsBefore int     `json:"windows_before"`
	WindowsAfter  int     `json:"windows_after"`
	RunsBefore    uint64  `json:"runs_before"`
	RunsAfter     uint64  `json:"runs_after"`
}

// Windows says what was compared: Changed is when the new version
// appeared (the sweep that saw it); the windows are [BeforeFrom, BeforeTo)
// and [AfterFrom, AfterTo]. For a new version BeforeTo is its load, where
// the kernel dates that after BeforeFrom: from its load to Changed it may
// already run, so that time is in neither window's profiles.
type Windows struct {
	Changed    time.Time `json:"changed"`
	BeforeFrom time.Time `json:"before_from"`
	BeforeTo   time.Time `json:"before_to"`
	AfterFrom  time.Time `json:"after_from"`
	AfterTo    time.Time `json:"after_to"`
}

// Comparison is the statistics of two sides: medians of per-interval
// ns/run, their ratio (after/before) with a 95% interval, the Mann-Whitney
// U p-value and the intervals compared (those at matched runs/s).
type Comparison struct {
	Ratio       float64 `json:"ratio"`
	RatioLo     float64 `json:"ratio_lo"`
	RatioHi     float64 `json:"ratio_hi"`
	P           float64 `json:"p"`
	BeforeNs    float64 `json:"before_ns_per_run"`
	AfterNs     float64 `json:"after_ns_per_run"`
	NBefore     int     `json:"n_before"`
	NAfter      int     `json:"n_after"`
	LoadLo      float64 `json:"runs_per_sec_lo"`
	LoadHi      float64 `json:"runs_per_sec_hi"`
	Alpha       float64 `json:"alpha"`
	MinChange   float64 `json:"min_change"`
	Significant bool    `json:"significant"`
	// Drift is how much the machine itself slowed between the windows:
	// the after/before ratio of its speed, told by Controls other programs
	// whose version did not change. Each interval of the program (a
	// shift's each bucket) is divided by the machine's speed at its time
	// before comparing, so a step of the machine inside a window is taken
	// out where it happened. 1 for a reload with no controls; a shift is
	// never claimed without them.
	Drift    float64 `json:"drift,omitempty"`
	Controls int     `json:"controls,omitempty"`
	// Undecided says why the data could not decide, when it could not.
	Undecided string `json:"undecided,omitempty"`
}

// Explanation is what the continuous CPU profiles say changed between the
// windows: the programs, functions and source lines whose CPU grew or
// shrank most. Off says why there is none (profiling off, no windows).
type Explanation struct {
	Off            string   `json:"off,omitempty"`
	BeforeProfiles int      `json:"before_profiles"`
	AfterProfiles  int      `json:"after_profiles"`
	Top            []Change `json:"top,omitempty"`
}

// Change is one program, function or source line's sampled CPU (percent
// of one CPU) in each window.
type Change struct {
	Level  string  `json:"level"` // "program", "function" or "line"
	Name   string  `json:"name"`
	Before float64 `json:"before_cpu_percent"`
	After  float64 `json:"after_cpu_percent"`
}

// Delta is how much the CPU grew (negative: shrank).
func (c Change) Delta() float64 { return c.After - c.Before }

// Regressions is GET /v1/regressions.
type Regressions struct {
	Since       time.Time    `json:"since"`
	Until       time.Time    `json:"until"`
	Regressions []Regression `json:"regressions"`
}

// Check is GET /v1/check: is the program's current version slower than
// the baseline by more than the limit?
type Check struct {
	Program  string  `json:"program"`
	Current  string  `json:"current_tag"`
	Baseline string  `json:"baseline"`
	Limit    float64 `json:"max_regression"`
	// Verdict is "slower" (exit 1), "ok" (exit 0) or "undecided" (exit 2).
	Verdict string `json:"verdict"`
	Comparison
}

// Verdicts of a check.
const (
	VerdictSlower    = "slower"
	VerdictOK        = "ok"
	VerdictUndecided = "undecided"
)
