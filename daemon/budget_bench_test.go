package daemon_test

import (
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkStatsBudgetBursty measures what the stats budget (the default,
// 1% of one CPU) does to a bursty workload's figures: a loop program
// (about 65 ns a run) run 1,000 times every millisecond for 2 s, then
// left idle for 3 s, over 60 s. In a burst stats would cost the programs
// about 4% of a CPU at full time, so the budget cuts the share a tick
// into each burst and gives it back a tick after. Against the load's own
// count: the error of the daemon's runs over the whole 60 s (the sum of
// its scaled intervals), and of its runs in each 5 s cycle (median and
// worst); and its ns/run over the 60 s against a daemon at --stats.duty
// 100% under the same load.
//
//	go test -run '^$' -bench StatsBudgetBursty -benchtime 1x ./daemon/
func BenchmarkStatsBudgetBursty(b *testing.B) {
	privtest.Root(b)
	name := "bench_bursty"
	prog, err := privtest.LoadLoop(name, dutyLoopTurns)
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	for range b.N {
		ns := map[string]float64{}
		for _, mode := range []string{"100%", "default"} {
			args := []string{"--interval", "1s", "--profile.every", "0", "--stats.duty", mode}
			if mode == "default" {
				args = args[:4]
			}
			d := startDaemon(b, b.TempDir(), args...)
			time.Sleep(2 * time.Second)
			start := time.Now()
			cycles := runBursts(b, prog, 12)
			time.Sleep(1500 * time.Millisecond) // the last tick after the last idle spell
			var pts []api.HistoryPoint
			if err := d.query(&pts, "history", name, "--since", time.Since(start.Add(-time.Second)).Round(time.Second).String()); err != nil {
				b.Fatal(err)
			}
			d.stop(b, syscall.SIGTERM)
			if len(pts) < 2 {
				b.Fatalf("%s: %d history points", mode, len(pts))
			}
			first, last := pts[0], pts[len(pts)-1]
			ns[mode] = float64(last.RunTimeNs-first.RunTimeNs) / float64(last.RunCnt-first.RunCnt)
			if mode != "default" {
				continue
			}
			// The daemon's runs in each cycle: between its points nearest
			// the cycle's start and end (a cycle ends idle, so a point
			// anywhere in the idle tail has all its runs).
			var made, counted uint64
			var errs []float64
			for _, c := range cycles {
				at := func(t time.Time) uint64 {
					n := first.RunCnt
					for _, p := range pts {
						if !p.Time.After(t) {
							n = p.RunCnt
						}
					}
					return n
				}
				got := at(c.end) - at(c.start)
				made += c.runs
				counted += got
				errs = append(errs, math.Abs(float64(got)/float64(c.runs)-1)*100)
			}
			b.ReportMetric((float64(counted)/float64(made)-1)*100, "%-runs-error-60s")
			b.ReportMetric(median(errs), "%-runs-error-per-5s-median")
			worst := 0.0
			for _, e := range errs {
				worst = max(worst, e)
			}
			b.ReportMetric(worst, "%-runs-error-per-5s-worst")
		}
		b.ReportMetric((ns["default"]/ns["100%"]-1)*100, "%-ns/run-diff-default-vs-100%")
	}
}

// burstCycle is one burst and the idle spell after it: when it began and
// ended, and the runs made in it.
type burstCycle struct {
	start, end time.Time
	runs       uint64
}

// runBursts runs prog 1,000 times every millisecond for 2 s, then idles
// 3 s, n times.
func runBursts(b *testing.B, prog *ebpf.Program, n int) []burstCycle {
	var cycles []burstCycle
	for range n {
		c := burstCycle{start: time.Now()}
		tick := time.NewTicker(time.Millisecond)
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); <-tick.C {
			if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: 1000}); err != nil {
				b.Fatal(err)
			}
			c.runs += 1000
		}
		tick.Stop()
		time.Sleep(3 * time.Second)
		c.end = time.Now()
		cycles = append(cycles, c)
	}
	return cycles
}
