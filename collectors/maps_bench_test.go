package collectors

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkMapReading times the daemon's reading of every map with 1,000
// hash maps of 10,000 entries each loaded (and 1,000 socket filters), side
// by side with what 1,000 programs cost each tick today: the iterator
// sweep (ProgIter) and the fd sweep (Sweep). Alternated within each
// round; medians. Also: the reading without the kernel's count (every key
// walked), the /proc scan for holders, and `bpftool map show -j` as a peer.
func BenchmarkMapReading(b *testing.B) {
	privtest.Root(b)
	const nMaps, nEntries, nProgs = 1000, 10000, 1000
	keys := make([]uint32, nEntries)
	vals := make([]uint64, nEntries)
	for i := range keys {
		keys[i], vals[i] = uint32(i), uint64(i)
	}
	fillStart := time.Now()
	for i := range nMaps {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: fmt.Sprintf("bench_m%d", i), Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: nEntries})
		if err != nil {
			b.Fatalf("create map %d: %v", i, err)
		}
		defer m.Close()
		if n, err := m.BatchUpdate(keys, vals, nil); err != nil || n != nEntries {
			b.Fatalf("fill map %d: %d, %v", i, n, err)
		}
	}
	b.Logf("1,000 maps x 10,000 entries created and filled in %v", time.Since(fillStart).Round(time.Millisecond))
	for i := range nProgs {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("bench_%d", i))
		if err != nil {
			b.Fatalf("load program %d: %v", i, err)
		}
		defer p.Close()
	}
	mapIter, err := NewMapIter()
	if err != nil {
		b.Fatalf("map iterator: %v", err)
	}
	defer mapIter.Close()
	progIter, err := NewProgIter()
	if err != nil {
		b.Fatalf("program iterator: %v", err)
	}
	defer progIter.Close()

	var reads, counts, walks, holders, iters, fds, tools []time.Duration
	var walked int
	for range b.N {
		for round := range 7 {
			start := time.Now()
			c, err := mapIter.Counts()
			if err != nil {
				b.Fatal(err)
			}
			counts = append(counts, time.Since(start))
			maps, _, err := ReadMaps(MapsOptions{Counts: c})
			if err != nil {
				b.Fatal(err)
			}
			reads = append(reads, time.Since(start))
			if n := countBench(maps, nEntries); n != nMaps {
				b.Fatalf("%d of %d bench maps read %d entries", n, nMaps, nEntries)
			}
			start = time.Now()
			if _, err := ScanHolders("/proc"); err != nil {
				b.Fatal(err)
			}
			holders = append(holders, time.Since(start))
			start = time.Now()
			if _, err := progIter.Sweep(nil); err != nil {
				b.Fatal(err)
			}
			iters = append(iters, time.Since(start))
			start = time.Now()
			if _, err := Sweep(nil); err != nil {
				b.Fatal(err)
			}
			fds = append(fds, time.Since(start))
			start = time.Now()
			if out, err := exec.Command("bpftool", "map", "show", "-j").Output(); err != nil || len(out) == 0 {
				b.Fatalf("bpftool map show: %v", err)
			}
			tools = append(tools, time.Since(start))
			if round == 0 { // ten million keys take half a minute: once
				start = time.Now()
				_, cost, err := ReadMaps(MapsOptions{WalkBudget: 1 << 30})
				if err != nil {
					b.Fatal(err)
				}
				walks = append(walks, time.Since(start))
				walked = cost.Walked
			}
		}
	}
	read, iter, fd := median(reads), median(iters), median(fds)
	b.Logf("map reading (kernel count + info + memlock, 1,000 maps): %v, of which the count pass %v; holders scan %v", read.Round(time.Microsecond), median(counts).Round(time.Microsecond), median(holders).Round(time.Microsecond))
	b.Logf("program sweep, 1,000+ programs: iterator %v, fd %v; bpftool map show -j %v; walking all %d keys instead %v",
		iter.Round(time.Microsecond), fd.Round(time.Microsecond), median(tools).Round(time.Millisecond), walked, median(walks).Round(time.Millisecond))
	b.Logf("per minute at the defaults (maps every 1m, programs every 1s): maps %v, program iterator %v, fd sweep %v",
		read.Round(time.Microsecond), (60 * iter).Round(time.Microsecond), (60 * fd).Round(time.Microsecond))
	b.ReportMetric(ms(read), "maps-ms")
	b.ReportMetric(ms(median(counts)), "count-ms")
	b.ReportMetric(ms(median(holders)), "holders-ms")
	b.ReportMetric(ms(iter), "prog-iter-ms")
	b.ReportMetric(ms(fd), "prog-fd-ms")
	b.ReportMetric(ms(median(walks)), "walk-all-ms")
	b.ReportMetric(ms(median(tools)), "bpftool-ms")
	b.ReportMetric(float64(read)/float64(fd), "maps/prog-fd")
	b.ReportMetric(float64(read)/float64(60*iter), "maps-per-min/prog-iter-per-min")
}

func countBench(maps []MapInfo, entries int64) int {
	n := 0
	for _, m := range maps {
		if len(m.Name) > 7 && m.Name[:7] == "bench_m" && m.Entries == entries && m.Counted == CountKernel {
			n++
		}
	}
	return n
}

// BenchmarkStatsCost prints what bpf_stats adds to each program run,
// measured as the daemon measures it at start (DefaultStatsCostRule):
// the kernel's test-run timer beside the wall clock, the pairs run, the
// spread of the pairs' own costs and whether the figure settled. Where
// something else keeps stats on there is no baseline, and it says so.
func BenchmarkStatsCost(b *testing.B) {
	privtest.Root(b)
	privtest.LockStats(b)
	for range b.N {
		c, err := MeasureStatsCost(DefaultStatsCostRule)
		if err != nil {
			b.Skipf("not measured: %v", err)
		}
		b.Logf("bpf_stats: %.1f ns per run (empty program %.0f ns off, %.0f ns on, least batches of %d pairs of %d runs; settled %v in %v); wall clock %.1f ns; pairs' own costs %.0f-%.0f ns (interquartile)",
			c.NsPerRun(), c.OffNsPerRun, c.OnNsPerRun, c.Pairs, c.Rule.Repeat, c.Settled, c.Took.Round(time.Millisecond), c.WallNsPerRun(), c.SpreadLowNs, c.SpreadHighNs)
		b.ReportMetric(c.NsPerRun(), "stats-ns/run")
		b.ReportMetric(c.WallNsPerRun(), "wall-ns/run")
		b.ReportMetric(c.OffNsPerRun, "off-ns/run")
		b.ReportMetric(c.OnNsPerRun, "on-ns/run")
		b.ReportMetric(float64(c.Pairs), "pairs")
	}
}
