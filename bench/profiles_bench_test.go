package bench

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkProfileCost is what bench --profile does to the figures and the
// run: two tests pinned to CPU 0, 7 alternating rounds with and without
// profiles after one of each to warm up. ns/run with profiles over without
// (the median of the rounds' ratios of medians) is the sampling's cost to
// the program measured: each of its 999 interrupts a second takes the
// measuring thread's time. The wall time added per test is the spans'
// start and stop and the profile's build and write.
func BenchmarkProfileCost(b *testing.B) {
	privtest.Root(b)
	privtest.LockStats(b) // timings shift when another test turns stats on
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^(baseline/socket_filter|maps/hash/lookup/size=1K/keys=uniform)$`)
	cfg.CPUs, cfg.Repeat, cfg.Measures = []int{0}, 50_000, 10
	tests := Select(Suite(), cfg)
	run := func(profiled bool) (*Report, time.Duration) {
		opts := Options{}
		if profiled {
			d, err := OpenProfileDir(b.TempDir(), cfg.CPUs)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			opts.Measuring = d.Measuring
		}
		start := time.Now()
		rep, err := Run(context.Background(), tests, cfg, opts)
		if err != nil || rep.Failed() {
			b.Fatalf("run: %v %+v", err, rep)
		}
		return rep, time.Since(start)
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	for b.Loop() {
		run(false)
		run(true)
		ratios := make([][]float64, len(tests))
		var walls []float64
		for range 7 {
			bare, bareWall := run(false)
			prof, profWall := run(true)
			for i := range tests {
				ratios[i] = append(ratios[i], prof.Results[i].Summary.Median/bare.Results[i].Summary.Median)
			}
			walls = append(walls, float64(profWall-bareWall)/float64(len(tests)))
		}
		for i, t := range tests {
			r := median(ratios[i])
			b.ReportMetric(r, t.Entry+"_ratio")
			fmt.Printf("%s: ns/run with --profile / without = %.3f (rounds: %.3f)\n", t.Name, r, ratios[i])
		}
		added := time.Duration(median(walls))
		b.ReportMetric(float64(added.Microseconds())/1000, "ms_added/test")
		fmt.Printf("wall time added per test: %v\n", added.Round(100*time.Microsecond))
	}
}
