// Command record writes a real per-interval ns/run series for the
// detector's replay benchmark: it loads a counted-loop socket filter, runs
// it at a steady rate with BPF_PROG_TEST_RUN and reads its run-time stats
// every interval, as the daemon does. With -control it runs a second,
// identical program beside it (same goroutine, same pacing) and writes its
// series too: what the machine's own drift looks like. With -neighbour it
// also runs a different program (a shorter loop, at its own pace from its
// own goroutine), recorded over the same minutes but not in step with the
// program: the daemon's case of a host with other busy programs. Needs
// root. The replay benchmarks read the files it writes with (50 minutes):
//
//	go run ./internal/regress/record -o internal/regress/testdata/pair.csv \
//		-control internal/regress/testdata/pair_control.csv \
//		-neighbour internal/regress/testdata/neighbour.csv
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
	neighbour := flag.String("neighbour", "", "CSV file for a different program run at its own pace beside it (optional)")
	flag.Parse()
	paths := []string{*out}
	if *control != "" {
		paths = append(paths, *control)
	}
	var nb *pacedProgram
	if *neighbour != "" {
		// Not a multiple of the program's: 3,000 iterations, 30 runs
		// every 7 ms, so its runs drift across the program's.
		nb = &pacedProgram{path: *neighbour, iters: 3000, batch: 30, every: 7 * time.Millisecond}
	}
	if err := record(paths, nb, *every, *n, int32(*iters), uint32(*batch)); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

// pacedProgram is a program run from its own goroutine at its own pace.
type pacedProgram struct {
	path  string
	iters int32
	batch uint32
	every time.Duration
}

func record(paths []string, nb *pacedProgram, every time.Duration, n int, iters int32, batch uint32) error {
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
	if nb != nil {
		p, err := privtest.LoadLoop("rg_neighbour", nb.iters)
		if err != nil {
			return err
		}
		defer p.Close()
		f, err := os.Create(nb.path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(f, "# %d-iteration loop, %d runs every %v from its own goroutine, read every %v, %s, a different program run beside %s\nns_per_run,runs_per_sec\n",
			nb.iters, nb.batch, nb.every, every, time.Now().UTC().Format(time.RFC3339), paths[0])
		go runPaced(p, nb.batch, nb.every)
		progs, files = append(progs, p), append(files, f)
	}
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			for _, p := range progs[:len(paths)] {
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

func runPaced(p *ebpf.Program, batch uint32, every time.Duration) {
	for range time.Tick(every) {
		p.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: batch})
	}
}
