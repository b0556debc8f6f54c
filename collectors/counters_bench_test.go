package collectors

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// BenchmarkCountersExactCost measures, with BPF_PROG_TEST_RUN repeat on an
// empty target, what one run costs with nothing on, with bpf_stats on,
// with exact counting (cpu-clock) on, and with both, and reports the added
// ns per run. Conditions alternate over rounds so that they see the same
// machine load; each keeps its least cost. Needs fentry: runs in the VM
// (BenchmarkCountersInVM boots it).
func BenchmarkCountersExactCost(b *testing.B) {
	if !vmtest.InVM() {
		b.Skip("needs fentry/fexit: runs in the VM (BenchmarkCountersInVM)")
	}
	privtest.Root(b)
	privtest.LockStats(b)
	c, err := NewExactCounters(ExactConfig{})
	if err != nil {
		b.Fatal(err)
	}
	target, err := btfprog.Load(uniqueName("empty"), asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()})
	if err != nil {
		b.Fatal(err)
	}
	defer target.Close()
	id := progID(b, target)

	const repeat = 20000
	packet := make([]byte, 14)
	cost := func() float64 {
		_, d, err := target.Benchmark(packet, repeat, nil)
		if err != nil {
			b.Fatalf("test run: %v", err)
		}
		return float64(d.Nanoseconds())
	}
	conditions := []struct {
		name         string
		stats, exact bool
	}{{"base", false, false}, {"stats", true, false}, {"exact", false, true}, {"both", true, true}}
	least := make([]float64, len(conditions))
	for i := range least {
		least[i] = math.Inf(1)
	}
	var perRun []float64 // cpu-clock the empty target was charged per run
	for range b.N {
		for range 7 {
			for i, cond := range conditions {
				var stats interface{ Close() error }
				if cond.stats {
					if stats, err = ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); err != nil {
						b.Fatalf("enable stats: %v", err)
					}
				}
				var w *CounterWindow
				if cond.exact {
					if w, err = c.Start(id, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
				cost() // warm up: TCG translates fresh code first
				least[i] = min(least[i], cost())
				if w != nil {
					r, _ := w.Read()
					if n, ok := r.PerRun(perfevent.CPUClock); ok {
						perRun = append(perRun, n)
					}
					w.Close()
				}
				if stats != nil {
					stats.Close()
				}
			}
		}
	}
	if on, err := privtest.StatsCounting(); err != nil || on {
		b.Fatalf("stats still on after the benchmark (%v): another holder skews the base", err)
	}
	base := least[0]
	b.ReportMetric(base, "base-ns/run")
	b.ReportMetric(least[1]-base, "stats-added-ns/run")
	b.ReportMetric(least[2]-base, "exact-added-ns/run")
	b.ReportMetric(least[3]-base, "stats+exact-added-ns/run")
	sort.Float64s(perRun)
	b.ReportMetric(perRun[len(perRun)/2], "exact-counted-ns/run")
}

// BenchmarkCountersInVM boots the test VM, runs BenchmarkCountersExactCost
// there and reports its figures here, so `make bench` on a host that
// refuses fentry still shows them.
func BenchmarkCountersInVM(b *testing.B) {
	res := vmtest.RunTests(b, vmtest.Config{}, nil, "-test.run", "^$",
		"-test.bench", "^BenchmarkCountersExactCost$", "-test.benchtime", "1x")
	m := vmtest.BenchMetrics(res.Output, "BenchmarkCountersExactCost")
	if m == nil {
		b.Fatalf("no result from BenchmarkCountersExactCost in the VM:\n%s", res.Output)
	}
	for unit, v := range m {
		if unit != "ns/op" {
			b.ReportMetric(v, unit)
		}
	}
	b.ReportMetric(res.Boot.Seconds(), "vm-boot-s")
}
