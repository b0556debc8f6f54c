package bench

import (
	"slices"
	"strings"
)

// A report of `bpfperf stat` is a macro-benchmark: what the BPF programs
// a command drives cost while it runs, one result per program (by type,
// full name and instance, so that runs on different days line up though
// the ids differ). Each result's measurements are its ns/run, one per run of the
// command, so compare, benchstat and Bencher treat it like a test of the
// micro-benchmark suite; Stat adds what only a live measurement has.

// MacroRun says what a stat report measured.
type MacroRun struct {
	// Command is what ran; empty for a window of the live system.
	Command []string `json:"command,omitempty"`
	// WindowSeconds is the window measured instead (--duration).
	WindowSeconds float64 `json:"window_seconds,omitempty"`
	// Runs of the command (--repeat), each one measurement.
	Runs int `json:"runs"`
	// IntervalMS is the time between readings while the command ran.
	IntervalMS float64 `json:"interval_ms"`
	// Source of the readings: "kernel" (read by bpfperf stat itself) or
	// "bpfperfd" (the daemon's, at its interval).
	Source string `json:"source"`
	// Wall is each run's duration, seconds.
	Wall Spread `json:"wall_seconds"`
	// ExitCodes are the command's, one per run.
	ExitCodes []int `json:"exit_codes,omitempty"`
}

// Spread is the median and spread of one figure over the runs.
type Spread struct {
	Median float64 `json:"median"`
	IQR    float64 `json:"iqr"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// SpreadOf summarizes xs.
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := Summarize(xs)
	return Spread{Median: s.Median, IQR: s.IQR, Min: s.Min, Max: s.Max}
}

// MacroResult is one program's figures over the runs of a stat report.
type MacroResult struct {
	Type string `json:"type"`
	// Name is the program's full name; KernelName the kernel's, cut to 15
	// characters, where it differs and is known.
	Name       string `json:"name"`
	KernelName string `json:"kernel_name,omitempty"`
	// Instance tells apart programs of one type and name in a run, in load
	// order: the result of instance 2 and up is named "name#2".
	Instance int `json:"instance,omitempty"`
	// IDs and Tags of the instances seen (a program reloaded by the
	// command has several).
	IDs  []uint32 `json:"ids"`
	Tags []string `json:"tags"`
	// Per run of the command.
	Runs            Spread `json:"runs"`
	RunTimeNs       Spread `json:"run_time_ns"`
	RunsPerSecond   Spread `json:"runs_per_second"`
	CPUPercent      Spread `json:"cpu_percent"` // of one CPU, as bpftop
	RecursionMisses Spread `json:"recursion_misses"`
	// SampledCPUPercent is the program's share of the sampled CPU time
	// (--profile), tail-call targets counted for themselves.
	SampledCPUPercent *Spread `json:"sampled_cpu_percent,omitempty"`
	// Loaded and Unloaded say an instance came or went during a run.
	Loaded   bool `json:"loaded_during,omitempty"`
	Unloaded bool `json:"unloaded_during,omitempty"`
	// PerRun are the raw deltas, one per run.
	PerRun []MacroSample `json:"per_run"`
}

// MacroSample is one program's deltas over one run of the command.
type MacroSample struct {
	Runs            uint64  `json:"runs"`
	RunTimeNs       uint64  `json:"run_time_ns"`
	RecursionMisses uint64  `json:"recursion_misses"`
	WallSeconds     float64 `json:"wall_seconds"`
}

// what is how a stat report's header names what ran.
func (m *MacroRun) what() string {
	if len(m.Command) == 0 {
		return "a window of the live system"
	}
	return "`" + shellJoin(m.Command) + "`"
}

func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || slices.ContainsFunc([]rune(a), func(r rune) bool { return r == ' ' || r == '\'' || r == '"' || r == '$' }) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
