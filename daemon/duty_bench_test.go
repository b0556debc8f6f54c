package daemon_test

import (
	"math"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkStatsDuty measures what --stats.duty buys and costs. The
// workload: an empty socket filter test-run 60M times (60,000 calls of
// 1,000), timed with no daemon, with bpfperfd at --stats.duty 100%, at
// --stats.duty 10% and at its defaults (the stats budget, 1% of one CPU)
// (1 s interval, profiling off), 5 rounds alternated,
// medians; the slowdown is what stats add to it. Then, under a steady
// load (100 runs every millisecond, paced by the clock), how far the daemon's runs/s and ns/run at 10% are from the
// load's own count and from full-time stats (3 windows of 6 s each).
//
//	go test -run '^$' -bench StatsDuty -benchtime 1x ./daemon/
func BenchmarkStatsDuty(b *testing.B) {
	privtest.Root(b)
	prog, err := privtest.LoadSocketFilter("bench_duty")
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	workload := func() time.Duration {
		start := time.Now()
		for range 60000 {
			if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: 1000}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	for range b.N {
		times := map[string][]time.Duration{}
		for range 5 {
			times["none"] = append(times["none"], workload())
			for _, duty := range []string{"100%", "10%", "default"} {
				args := []string{"--interval", "1s", "--profile.every", "0", "--stats.duty", duty}
				if duty == "default" { // the stats budget, 1% of one CPU
					args = args[:4]
				}
				d := startDaemon(b, b.TempDir(), args...)
				time.Sleep(time.Second)
				times[duty] = append(times[duty], workload())
				if duty == "default" {
					// The first run starts from idle: the budget lowers
					// the share only at the tick after the load began, so
					// that first second is paid in full. A second run,
					// the load already steady, pays the share alone.
					times["settled"] = append(times["settled"], workload())
				}
				d.stop(b, syscall.SIGTERM)
			}
		}
		med := func(k string) float64 {
			s := slices.Clone(times[k])
			slices.Sort(s)
			return float64(s[len(s)/2].Nanoseconds()) / 60e6
		}
		none, full, tenth, def := med("none"), med("100%"), med("10%"), med("default")
		b.ReportMetric(none, "ns/run-no-daemon")
		b.ReportMetric(full-none, "stats-ns/run-at-100%")
		b.ReportMetric(tenth-none, "stats-ns/run-at-10%")
		// At the defaults the workload (flat out, millions of runs a
		// second) is far over the budget: stats on for the least share.
		b.ReportMetric(def-none, "stats-ns/run-at-default-from-idle")
		b.ReportMetric(med("settled")-none, "stats-ns/run-at-default-settled")
		b.ReportMetric((1-(tenth-none)/(full-none))*100, "%-of-slowdown-removed")

		rateErr, nsDiff := dutyAccuracy(b, prog)
		b.ReportMetric(rateErr, "%-runs/s-error-at-10%")
		b.ReportMetric(nsDiff, "%-ns/run-diff-10%-vs-100%")
		b.ReportMetric(floorAccuracy(b, prog), "%-runs/s-error-at-1%")
	}
}

// dutyAccuracy runs a steady load under the daemon at 100% and at 10%
// and returns the median error of its runs/s at 10% against the load's
// own count, and how far its median ns/run at 10% is from that at 100%,
// both in percent.
func dutyAccuracy(b *testing.B, prog *ebpf.Program) (rateErr, nsDiff float64) {
	ns := map[string]float64{}
	var errs []float64
	for _, duty := range []string{"100%", "10%"} {
		name := "bench_duty"
		d := startDaemon(b, b.TempDir(), "--interval", "1s", "--profile.every", "0", "--stats.duty", duty)
		load := startLoad(b, prog)
		time.Sleep(2 * time.Second)
		var perRun []float64
		for range 3 {
			want := load.rate(6 * time.Second)
			got, pts := historyRate(b, d, name, 6*time.Second)
			if duty == "10%" {
				errs = append(errs, math.Abs(got/want-1)*100)
			}
			if p := pts[len(pts)-1].AvgNsPerRun; p != nil {
				perRun = append(perRun, *p)
			}
		}
		load.end()
		d.stop(b, syscall.SIGTERM)
		ns[duty] = median(perRun)
	}
	return median(errs), (ns["10%"]/ns["100%"] - 1) * 100
}

// floorAccuracy runs a steady load under the daemon at 1%, the budget's
// floor (its on parts gathered, one every 10 or so intervals), and
// returns the median error of its runs/s over three 20 s spans against
// the load's own count, in percent.
func floorAccuracy(b *testing.B, prog *ebpf.Program) float64 {
	load := startLoad(b, prog)
	defer load.end()
	d := startDaemon(b, b.TempDir(), "--interval", "1s", "--profile.every", "0", "--stats.duty", "1%")
	defer d.stop(b, syscall.SIGTERM)
	time.Sleep(2 * time.Second)
	var errs []float64
	for range 3 {
		want := load.rate(20 * time.Second)
		got, _ := historyRate(b, d, "bench_duty", 20*time.Second)
		errs = append(errs, math.Abs(got/want-1)*100)
	}
	return median(errs)
}
