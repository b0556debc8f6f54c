package api

import "time"

// BenchRun describes one stored benchmark run: the answer to POST
// /v1/bench/runs and a row of GET /v1/bench/runs. GET /v1/bench/runs/{id}
// answers with the report itself (bench.Report's JSON).
type BenchRun struct {
	ID     uint64    `json:"id"`
	Time   time.Time `json:"time"`   // when the run started
	Stored time.Time `json:"stored"` // when the daemon received it
	Tests  int       `json:"tests"`  // results in the report, skipped and failed included
	Failed int       `json:"failed"`
	Kernel string    `json:"kernel"`
	Commit string    `json:"git_commit,omitempty"`
	Label  string    `json:"label,omitempty"`
	// Bytes is the report's size as received; Stored bytes may be fewer.
	Bytes int `json:"bytes"`
}

// BenchRuns is GET /v1/bench/runs.
type BenchRuns struct {
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	Runs  []BenchRun `json:"runs"`
}

// MaxBenchReport bounds one stored report. A full suite's report with
// every measurement is well under a megabyte.
const MaxBenchReport = 64 << 20

// HeaderBenchRun carries a stored run's id with its report.
const HeaderBenchRun = "Bpfperf-Bench-Run"
