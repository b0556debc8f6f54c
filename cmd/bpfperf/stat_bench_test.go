package main

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkStatOverhead is what `bpfperf stat` adds to the command it
// measures: a command test-running an empty socket filter 2,000,000 times
// (bpftool prog run ... repeat), alone and under stat (readings every 1 s,
// the default), in 5 alternating pairs after one warm-up of each. The goal
// is the run-time stats' own cost only, so the figure beside it is that
// cost (collectors.MeasureStatsCost) times the runs.
func BenchmarkStatOverhead(b *testing.B) {
	privtest.Root(b)
	privtest.LockStats(b)
	buildTop(b)
	prog, err := privtest.LoadSocketFilter("stat_overhead")
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	info, _ := prog.Info()
	id, _ := info.ID()
	const runs = 2_000_000
	pkt := packetFile(b)
	bare := []string{"bpftool", "prog", "run", "id", fmt.Sprint(id), "data_in", pkt, "repeat", fmt.Sprint(runs)}
	under := append([]string{topBin.cli, "stat", "-o", "csv", "--"}, bare...)
	wall := func(argv []string) time.Duration {
		start := time.Now()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return time.Since(start)
	}
	empty := []string{"true"}
	underEmpty := append([]string{topBin.cli, "stat", "-o", "csv", "--"}, empty...)
	for _, argv := range [][]string{bare, under, empty, underEmpty} {
		wall(argv) // warm-up
	}
	var alone, stat, fixedAlone, fixedStat []time.Duration
	for range 5 {
		alone = append(alone, wall(bare))
		stat = append(stat, wall(under))
		fixedAlone = append(fixedAlone, wall(empty))
		fixedStat = append(fixedStat, wall(underEmpty))
	}
	cost, err := collectors.MeasureStatsCost(collectors.DefaultStatsCostRule)
	if err != nil {
		b.Fatal(err)
	}
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	a, s := median(alone), median(stat)
	fixed := median(fixedStat) - median(fixedAlone)
	perRun := float64(s-a-fixed) / runs
	b.ReportMetric(float64(fixed)/1e6, "fixed-ms")
	b.ReportMetric(perRun, "added-ns/run")
	b.ReportMetric(cost.NsPerRun(), "stats-ns/run")
	fmt.Printf("stat overhead, %d runs of an empty socket filter (bpftool prog run), medians of 5 pairs after a warm-up:\n", runs)
	fmt.Printf("  alone %v, under bpfperf stat %v (+%v)\n", a.Round(time.Millisecond), s.Round(time.Millisecond), (s - a).Round(time.Millisecond))
	fmt.Printf("  fixed cost (stat -- true vs true: start, fingerprint, stats fd, two sweeps): %v\n", fixed.Round(time.Millisecond))
	fmt.Printf("  the rest per run: %.1f ns; run-time stats' own cost: %.1f ns/run (ratio %.2f)\n", perRun, cost.NsPerRun(), perRun/cost.NsPerRun())
}
