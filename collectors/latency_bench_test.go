package collectors

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/loglinear"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// BenchmarkLatencyCost measures what a latency window costs each run of
// its target and how close its figures come to exact ones:
//
//   - the added ns per run of an empty target (BPF_PROG_TEST_RUN repeat),
//     with the kernel's stats off and on, and of a window that also
//     counts a perf event per run (cycles where a PMU exists, else
//     cpu-clock: the same two reads of a perf counter), conditions
//     alternated over rounds, each keeping its least;
//   - the calibrated floor (what timing adds inside each interval);
//   - the histogram's bucket error: exact per-run times of the mix
//     target (each run's own test-run duration) against the quantiles the
//     histogram reads from the same times, the largest gap of p50, p90,
//     p99 and p99.9;
//   - the window's p50 and p99, less the floor, against those exact times
//     taken without the window, as ratios (the median of 3 rounds).
//
// Needs fentry: runs in the VM (BenchmarkLatencyInVM boots it).
func BenchmarkLatencyCost(b *testing.B) {
	if !vmtest.InVM() {
		b.Skip("needs fentry/fexit: runs in the VM (BenchmarkLatencyInVM)")
	}
	privtest.Root(b)
	privtest.LockStats(b)
	lt, err := NewLatencyTimer(LatencyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ev := perfevent.Cycles
	if why := privtest.NoPMU(b); why != "" {
		b.Logf("no PMU (%s): the per-run event is cpu-clock", why)
		ev = perfevent.CPUClock
	}
	lte, err := NewLatencyTimer(LatencyConfig{Event: &ev})
	if err != nil {
		b.Fatal(err)
	}
	empty, err := btfprog.Load(uniqueName("empty"), asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	mix := loadMixTarget(b)

	const repeat = 20000
	cost := func() float64 {
		_, d, err := empty.Benchmark(fastPacket, repeat, nil)
		if err != nil {
			b.Fatalf("test run: %v", err)
		}
		return float64(d.Nanoseconds())
	}
	conditions := []struct {
		name                  string
		stats, latency, event bool
	}{{"base", false, false, false}, {"stats", true, false, false}, {"latency", false, true, false}, {"both", true, true, false},
		{"event", false, true, true}}
	least := make([]float64, len(conditions))
	for i := range least {
		least[i] = math.Inf(1)
	}
	var cal Calibration
	var bucketErr, eventFloor float64
	var p50s, p99s []float64
	for range b.N {
		for range 5 {
			for i, cond := range conditions {
				var stats interface{ Close() error }
				if cond.stats {
					if stats, err = ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); err != nil {
						b.Fatalf("enable stats: %v", err)
					}
				}
				var w *LatencyWindow
				if cond.latency {
					timer := lt
					if cond.event {
						timer = lte
					}
					if w, err = timer.Start(progID(b, empty), time.Minute); err != nil {
						b.Fatal(err)
					}
				}
				cost() // warm up: TCG translates fresh code first
				least[i] = min(least[i], cost())
				if w != nil {
					w.Close()
				}
				if stats != nil {
					stats.Close()
				}
			}
		}
		if cal, err = lt.Calibrate(); err != nil {
			b.Fatal(err)
		}
		ecal, err := lte.Calibrate()
		if err != nil || ecal.EventErr != nil {
			b.Fatalf("calibrate with %v per run: %v %v", ev, err, ecal.EventErr)
		}
		eventFloor = ecal.EventFloor

		// Three rounds: under TCG one round's ratio may be off by a third.
		for range 3 {
			// Exact per-run times of the mix, each run's own test-run
			// duration (repeat 1), then the same mix through a window.
			exact := mixDurations(b, mix, 2000)
			h := loglinear.New()
			for _, ns := range exact {
				h.Add(uint64(ns))
			}
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				want := exactQuantile(exact, q)
				bucketErr = max(bucketErr, math.Abs(h.Quantile(q)-want)/want)
			}
			w, err := lt.Start(progID(b, mix), time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			mixDurations(b, mix, 2000)
			w.Stop()
			r, err := w.Read()
			w.Close()
			if err != nil {
				b.Fatal(err)
			}
			s := r.Hist.Summarize(cal.FloorNs)
			p50s = append(p50s, s.P50/exactQuantile(exact, 0.5))
			p99s = append(p99s, s.P99/exactQuantile(exact, 0.99))
		}
	}
	if on, err := privtest.StatsCounting(); err != nil || on {
		b.Fatalf("stats still on after the benchmark (%v): another holder skews the base", err)
	}
	base := least[0]
	b.ReportMetric(base, "base-ns/run")
	b.ReportMetric(least[1]-base, "stats-added-ns/run")
	b.ReportMetric(least[2]-base, "latency-added-ns/run")
	b.ReportMetric(least[3]-base, "stats+latency-added-ns/run")
	b.ReportMetric(least[4]-base, "latency+event-added-ns/run")
	b.ReportMetric(eventFloor, "event-floor")
	b.ReportMetric(cal.FloorNs, "floor-ns")
	b.ReportMetric(100*bucketErr, "bucket-error-max-%")
	b.ReportMetric(medianFloat(p50s), "window-p50/exact")
	b.ReportMetric(medianFloat(p99s), "window-p99/exact")
}

// mixDurations runs the mix target n times (every slowEvery-th run slow)
// and returns each run's duration as the kernel's test run measured it.
func mixDurations(tb testing.TB, prog *ebpf.Program, n int) []float64 {
	tb.Helper()
	out := make([]float64, 0, n)
	for i := range n {
		in := fastPacket
		if i%slowEvery == slowEvery-1 {
			in = slowPacket
		}
		_, d, err := prog.Benchmark(in, 1, nil)
		if err != nil {
			tb.Fatalf("run %d: %v", i, err)
		}
		out = append(out, float64(d.Nanoseconds()))
	}
	return out
}

func exactQuantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

// BenchmarkLatencyInVM boots the test VM, runs BenchmarkLatencyCost there
// and reports its figures here, so `make bench` on a host that refuses
// fentry still shows them.
func BenchmarkLatencyInVM(b *testing.B) {
	res := vmtest.RunTests(b, vmtest.Config{}, nil, "-test.run", "^$",
		"-test.bench", "^BenchmarkLatencyCost$", "-test.benchtime", "1x")
	m := vmtest.BenchMetrics(res.Output, "BenchmarkLatencyCost")
	if m == nil {
		b.Fatalf("no result from BenchmarkLatencyCost in the VM:\n%s", res.Output)
	}
	for unit, v := range m {
		if unit != "ns/op" {
			b.ReportMetric(v, unit)
		}
	}
	b.ReportMetric(res.Boot.Seconds(), "vm-boot-s")
}
