package api

// Counters are the cumulative bpf_stats of a program at one moment.
type Counters struct {
	RunTimeNs       uint64 `json:"run_time_ns"`
	RunCnt          uint64 `json:"run_cnt"`
	RecursionMisses uint64 `json:"recursion_misses"`
}

// Rates derived from two cumulative readings of one program. A nil field is
// a number that cannot be had (no earlier reading, no runs, no time passed):
// it is absent, not zero.
type Rates struct {
	RunsPerSec  *float64 `json:"runs_per_sec,omitempty"`
	AvgNsPerRun *float64 `json:"avg_ns_per_run,omitempty"`
	// CPUPercent is run time over wall time, relative to one CPU (like
	// bpftop): 100 means one CPU's worth of time spent in the program.
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
}
