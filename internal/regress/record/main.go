// Command record writes a real per-interval ns/run series for the
// detector's replay benchmark: it loads a counted-loop socket filter, runs
// it at a steady rate with BPF_PROG_TEST_RUN and reads its run-time stats
// every interval, as the daemon does. With -control it runs a second,
// identical program beside it (same goroutine, same pacing) and writes its
// series too: what the machine's own drift looks like. With -neighbour it
// also runs a different program (a shorter loop, at its own pace from its
// own goroutine), recorded over the same minutes but not in step with the
// program: the daemon's case of a host with other busy programs.
//
// Each row also holds what bpfperfd would have read of the same interval
// under a stats duty cycle (-duties, 10% and 1% by default): the deltas
// over only the last share of the interval, the part a duty keeps stats
// on, and the rate scaled to the whole interval as the duty cycle scales
// it (daemon/sampler/duty.go). Stats stay on all the time here, so the
// full interval and each duty's share are read from the same runs of the
// same minutes: the replay compares them with nothing else changed. A
// share that saw no run is an empty field, as the daemon stores no point.
//
// With -bursty the program (and its copy) runs in bursts instead, as
// traffic comes: on for 0.3 to 4 s, then off for 0.5 to 10 s (uniform,
// from a fixed seed), at the same pace while on. Intervals, and duty
// shares, that a burst missed are empty fields.
//
// Needs root. The replay benchmarks read the files it writes with (50
// minutes each):
//
//	go run ./internal/regress/record -o internal/regress/testdata/pair.csv \
//		-control internal/regress/testdata/pair_control.csv \
//		-neighbour internal/regress/testdata/neighbour.csv
//
// and, over the same 50 minutes on a busy host, one of each load:
//
//	go run ./internal/regress/record -o internal/regress/testdata/busy_steady.csv \
//		-control internal/regress/testdata/busy_steady_control.csv &
//	go run ./internal/regress/record -bursty -o internal/regress/testdata/busy_bursty.csv \
//		-control internal/regress/testdata/busy_bursty_control.csv
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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
	dutyList := flag.String("duties", "10,1", "stats duty shares in percent, each read over the last share of every interval")
	bursty := flag.Bool("bursty", false, "run the program in bursts (0.3-4 s on, 0.5-10 s off) instead of steadily")
	note := flag.String("note", "", "what else ran on the host, for the files' first line")
	flag.Parse()
	duties, err := parseDuties(*dutyList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(2)
	}
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
	load := load{iters: int32(*iters), batch: uint32(*batch), bursty: *bursty, note: *note}
	if err := record(paths, nb, duties, *every, *n, load); err != nil {
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

// parseDuties reads -duties: whole percents below 100, returned from the
// largest share to the smallest (the order of their readings).
func parseDuties(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := strconv.Atoi(strings.TrimSuffix(f, "%"))
		if err != nil || d < 1 || d > 99 {
			return nil, fmt.Errorf("-duties %q: want percents from 1 to 99", s)
		}
		out = append(out, d)
	}
	slices.Sort(out)
	slices.Reverse(out)
	return slices.Compact(out), nil
}

// header is the CSV's column line: the full interval, then each duty.
func header(duties []int) string {
	cols := []string{"ns_per_run", "runs_per_sec"}
	for _, d := range duties {
		cols = append(cols, fmt.Sprintf("ns_per_run_duty%d", d), fmt.Sprintf("runs_per_sec_duty%d", d))
	}
	return strings.Join(cols, ",")
}

// reading is every program's counters at one moment.
type reading struct {
	at    time.Time
	stats []*ebpf.ProgramStats
}

func read(progs []*ebpf.Program) (reading, error) {
	r := reading{at: time.Now(), stats: make([]*ebpf.ProgramStats, len(progs))}
	for i, p := range progs {
		var err error
		if r.stats[i], err = p.Stats(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// fields are program i's ns/run and runs/s from one reading to a later
// one: empty when it made no run in between.
func fields(from, to reading, i int) string {
	runs := to.stats[i].RunCount - from.stats[i].RunCount
	if runs == 0 {
		return ","
	}
	return fmt.Sprintf("%.2f,%.1f", float64(to.stats[i].Runtime-from.stats[i].Runtime)/float64(runs),
		float64(runs)/to.at.Sub(from.at).Seconds())
}

// load is how the program (and its copy) is run.
type load struct {
	iters  int32
	batch  uint32 // runs every 10 ms, while on
	bursty bool
	note   string
}

// describe is the files' first line's account of the load.
func (l load) describe(every time.Duration) string {
	pace := "steadily"
	if l.bursty {
		pace = "in bursts (on 0.3-4 s, off 0.5-10 s)"
	}
	s := fmt.Sprintf("%d-iteration loop, %d runs every 10 ms %s, read every %v", l.iters, l.batch, pace, every)
	if l.note != "" {
		s += ", " + l.note
	}
	return s
}

// bursts keeps on true while a burst lasts and false between them,
// forever: a fixed seed, so that a recording can be made again alike.
func bursts(on *atomic.Bool) {
	rng := rand.New(rand.NewPCG(2026, 1127))
	for {
		on.Store(true)
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(3700*time.Millisecond))))
		on.Store(false)
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(9500*time.Millisecond))))
	}
}

func record(paths []string, nb *pacedProgram, duties []int, every time.Duration, n int, ld load) error {
	iters, batch := ld.iters, ld.batch
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
		fmt.Fprintf(files[i], "# %s, %s, program %d of %d run side by side\n%s\n",
			ld.describe(every), time.Now().UTC().Format(time.RFC3339), i+1, len(paths), header(duties))
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
		fmt.Fprintf(f, "# %d-iteration loop, %d runs every %v from its own goroutine, read every %v, %s, a different program run beside %s\n%s\n",
			nb.iters, nb.batch, nb.every, every, time.Now().UTC().Format(time.RFC3339), paths[0], header(duties))
		go runPaced(p, nb.batch, nb.every)
		progs, files = append(progs, p), append(files, f)
	}
	var on atomic.Bool
	on.Store(true)
	if ld.bursty {
		go bursts(&on)
	}
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			if !on.Load() {
				continue
			}
			for _, p := range progs[:len(paths)] {
				p.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: batch})
			}
		}
	}()
	prev, err := read(progs)
	if err != nil {
		return err
	}
	shares := make([]reading, len(duties))
	for k := 1; k <= n; k++ {
		end := prev.at.Add(every)
		for j, d := range duties {
			time.Sleep(time.Until(end.Add(-every * time.Duration(d) / 100)))
			if shares[j], err = read(progs); err != nil {
				return err
			}
		}
		time.Sleep(time.Until(end))
		cur, err := read(progs)
		if err != nil {
			return err
		}
		for i, f := range files {
			row := []string{fields(prev, cur, i)}
			for j := range duties {
				row = append(row, fields(shares[j], cur, i))
			}
			fmt.Fprintln(f, strings.Join(row, ","))
		}
		prev = cur
	}
	return nil
}

func runPaced(p *ebpf.Program, batch uint32, every time.Duration) {
	for range time.Tick(every) {
		p.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: batch})
	}
}
