package daemon_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkDaemonCostGoals measures bpfperfd against its goals for a
// production host (issue 16): 1,000 loaded programs, 100 of them busy (3
// runs each a second), the default 1 s interval with continuous profiling
// on (the defaults). It reports the daemon's CPU over its first minute,
// start-up included (the CPU time the process has when the minute ends:
// goal ≤ 2% of one core), then over the next 60 s after a 10 s pause
// (steady state: goal ≤ 0.5%), and its RSS at the end (goal ≤ 50 MiB).
// Two and a quarter minutes a run.
//
//	go test -run '^$' -bench DaemonCostGoals -benchtime 1x ./daemon/
func BenchmarkDaemonCostGoals(b *testing.B) {
	privtest.Root(b)
	progs := loadFilters(b, "bench_g", 1000)
	busy := func(until time.Time) {
		for time.Now().Before(until) {
			for _, p := range progs[:100] {
				privtest.Run(p, 3)
			}
			time.Sleep(time.Second)
		}
	}
	for range b.N {
		// The process's CPU time starts at zero: its first minute is what
		// it has used when the minute since it started ends.
		started := time.Now()
		d := startDaemon(b, b.TempDir(), "--interval", "1s")
		pid := d.cmd.Process.Pid
		busy(started.Add(time.Minute))
		first := procCPU(b, pid).Seconds() / time.Since(started).Seconds() * 100
		busy(time.Now().Add(10 * time.Second))
		cpu0, at0 := procCPU(b, pid), time.Now()
		busy(at0.Add(time.Minute))
		steady := (procCPU(b, pid) - cpu0).Seconds() / time.Since(at0).Seconds() * 100
		b.ReportMetric(first, "cpu-%-first-minute")
		b.ReportMetric(steady, "cpu-%-steady")
		b.ReportMetric(float64(rssBytes(b, pid))/(1<<20), "rss-MiB")
		d.stop(b, syscall.SIGTERM)
	}
}
