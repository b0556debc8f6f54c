// Command record writes a real per-interval ns/run series for the
// detector's replay benchmark: it loads a counted-loop socket filter, runs
// it at a steady rate with BPF_PROG_TEST_RUN and reads its run-time stats
// every interval, as the daemon does. With -control it runs a second,
// identical program beside it (same goroutine, same pacing) and writes its
// series too: what the machine's own drift looks like. Needs root. The
// replay benchmarks read the pair it writes with (50 minutes):
//
//	go run ./internal/regress/record -o internal/regress/testdata/pair.csv \
//		-control internal/regress/testdata/pair_control.csv
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
	control := flag.String("control", "", "CSV file for a second, identical program run beside it (optional)")
	every := flag.Duration("interval", time.Second, "sampling interval (the daemon's default)")
	n := flag.Int("n", 3000, "intervals to record")
	iters := flag.Int("iterations", 10000, "loop iterations per run")
	batch := flag.Uint("batch", 50, "runs every 10 ms")
	flag.Parse()
	paths := []string{*out}
	if *control != "" {
		paths = append(paths, *control)
	}
	if err := record(paths, *every, *n, int32(*iters), uint32(*batch)); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func record(paths []string, every time.Duration, n int, iters int32, batch uint32) error {
	stats, err := collectors.EnableStats(collectors.StatsConfig{ProcRoot: "/proc", Mode: "auto"})
	if err != nil {
		return err
	}
	defer stats.Restore()
	progs := make([]*ebpf.Program, len(paths))
	files := make([]*os.File, len(paths))
	for i, path := range paths {
		if progs[i], err = privtest.LoadLoop(fmt.Sprintf("rg_record%d", i), iters); err != nil {
			return err
		}
		defer progs[i].Close()
		if files[i], err = os.Create(path); err != nil {
			return err
		}
		defer files[i].Close()
		fmt.Fprintf(files[i], "# %d-iteration loop, %d runs every 10 ms, read every %v, %s, program %d of %d run side by side\nns_per_run,runs_per_sec\n",
			iters, batch, every, time.Now().UTC().Format(time.RFC3339), i+1, len(paths))
	}
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			for _, p := range progs {
				p.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: batch})
			}
		}
	}()
	prev := make([]*ebpf.ProgramStats, len(progs))
	for i, p := range progs {
		if prev[i], err = p.Stats(); err != nil {
			return err
		}
	}
	prevAt := time.Now()
	for k := 0; k < n; k++ {
		time.Sleep(every)
		now := time.Now()
		for i, p := range progs {
			cur, err := p.Stats()
			if err != nil {
				return err
			}
			if runs := cur.RunCount - prev[i].RunCount; runs > 0 {
				fmt.Fprintf(files[i], "%.2f,%.1f\n", float64(cur.Runtime-prev[i].Runtime)/float64(runs), float64(runs)/now.Sub(prevAt).Seconds())
			}
			prev[i] = cur
		}
		prevAt = now
	}
	return nil
}
