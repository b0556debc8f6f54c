package collectors

import (
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkSweepMethods times one sweep of every program three ways, at
// 100, 1,000 and 10,000 extra socket filters loaded: the iterator sweep
// (ProgIter), the fd sweep (Sweep) and a whole `bpftool prog show -j`.
// The three alternate within each round, so they see the same machine
// load; medians are reported.
func BenchmarkSweepMethods(b *testing.B) {
	privtest.Root(b)
	it, err := NewProgIter()
	if err != nil {
		b.Fatalf("load iterator sweep: %v", err)
	}
	defer it.Close()
	pool := &filterPool{prefix: "bench"}
	defer pool.close()
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("progs=%d", n), func(b *testing.B) {
			pool.grow(b, n)
			rounds := 21
			if n >= 10000 {
				rounds = 7 // bpftool takes a third of a second each
			}
			buf := make([]Sample, 0, n+100)
			var iters, sweeps, tools []time.Duration
			for range b.N {
				for range rounds {
					start := time.Now()
					if buf, err = it.Sweep(buf[:0]); err != nil {
						b.Fatal(err)
					}
					iters = append(iters, time.Since(start))
					if len(buf) < n {
						b.Fatalf("iterator read %d programs, %d loaded", len(buf), n)
					}
					start = time.Now()
					if buf, err = Sweep(buf[:0]); err != nil {
						b.Fatal(err)
					}
					sweeps = append(sweeps, time.Since(start))
					tools = append(tools, bpftoolShow(b))
				}
			}
			iter, fd, tool := median(iters), median(sweeps), median(tools)
			b.ReportMetric(ms(iter), "iter-ms")
			b.ReportMetric(ms(fd), "fd-ms")
			b.ReportMetric(ms(tool), "bpftool-ms")
			b.ReportMetric(float64(tool)/float64(iter), "iter-x-faster-than-bpftool")
			b.ReportMetric(float64(fd)/float64(iter), "iter-x-faster-than-fd")
		})
	}
}

// filterPool holds socket filters that sub-benchmarks of growing sizes
// share: grow loads up to n in all, so a filter on one size loads no more
// than it needs. The caller defers close.
type filterPool struct {
	prefix string
	progs  []*ebpf.Program
}

func (f *filterPool) grow(b *testing.B, n int) {
	b.Helper()
	for len(f.progs) < n {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("%s_%d", f.prefix, len(f.progs)))
		if err != nil {
			b.Fatalf("load program %d: %v", len(f.progs), err)
		}
		f.progs = append(f.progs, p)
	}
}

func (f *filterPool) close() {
	for _, p := range f.progs {
		p.Close()
	}
}
