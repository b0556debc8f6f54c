package api

import (
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// BenchRun describes one stored benchmark run: the answer to POST
// /v1/bench/runs and a row of GET /v1/bench/runs (store.BenchRun). GET
// /v1/bench/runs/{id} answers with the report itself (bench.Report's JSON).
type BenchRun = store.BenchRun

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
