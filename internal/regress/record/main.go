// Command record writes a real per-interval ns/run series for the
// detector's replay benchmark: it loads a counted-loop socket filter, runs
// it at a steady rate with BPF_PROG_TEST_RUN and reads its run-time stats
// every interval, as the daemon does. Needs root.
//
//	go run ./internal/regress/record -o internal/regress/testdata/loop.csv
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func main() {
	out := flag.String("o", "", "CSV file to write")
	every := flag.Duration("interval", 200*time.Millisecond, "sampling interval")
	n := flag.Int("n", 1500, "intervals to record")
	iters := flag.Int("iterations", 10000, "loop iterations per run")
	batch := flag.Uint("batch", 50, "runs every 10 ms")
	flag.Parse()
	if err := record(*out, *every, *n, int32(*iters), uint32(*batch)); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func record(path string, every time.Duration, n int, iters int32, batch uint32) error {
	stats, err := collectors.EnableStats(collectors.StatsConfig{ProcRoot: "/proc", Mode: "auto"})
	if err != nil {
		return err
	}
	defer stats.Restore()
	prog, err := privtest.LoadLoop("rg_record", iters)
	if err != nil {
		return err
	}
	defer prog.Close()
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: batch})
		}
	}()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "# %d-iteration loop, %d runs every 10 ms, read every %v, %s\nns_per_run,runs_per_sec\n", iters, batch, every, time.Now().UTC().Format(time.RFC3339))
	prev, _ := prog.Stats()
	prevAt := time.Now()
	for i := 0; i < n; i++ {
		time.Sleep(every)
		cur, err := prog.Stats()
		if err != nil {
			return err
		}
		now := time.Now()
		runs := cur.RunCount - prev.RunCount
		if runs > 0 {
			fmt.Fprintf(f, "%.2f,%.1f\n", float64(cur.Runtime-prev.Runtime)/float64(runs), float64(runs)/now.Sub(prevAt).Seconds())
		}
		prev, prevAt = cur, now
	}
	return nil
}
