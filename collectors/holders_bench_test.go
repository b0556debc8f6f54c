package collectors

import (
	"fmt"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkHolders times one scan of who holds what with this process
// holding 1,000 and then 10,000 program fds: the holders iterator
// (HolderIter) against the /proc walk (ScanHolders), alternated within
// each round so both see the same machine; medians and their ratio.
func BenchmarkHolders(b *testing.B) {
	privtest.Root(b)
	it, err := NewHolderIter()
	if err != nil {
		b.Fatalf("load holders iterator: %v", err)
	}
	defer it.Close()
	pool := &filterPool{prefix: "held"}
	defer pool.close()
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("fds=%d", n), func(b *testing.B) {
			pool.grow(b, n)
			var iters, walks []time.Duration
			for range b.N {
				for range 7 {
					start := time.Now()
					h, err := it.Scan("/proc")
					if err != nil {
						b.Fatal(err)
					}
					iters = append(iters, time.Since(start))
					if len(h.Progs) < n {
						b.Fatalf("iterator found holders of %d programs, %d held here", len(h.Progs), n)
					}
					start = time.Now()
					if _, err := ScanHolders("/proc"); err != nil {
						b.Fatal(err)
					}
					walks = append(walks, time.Since(start))
				}
			}
			iter, walk := median(iters), median(walks)
			b.ReportMetric(ms(iter), "iter-ms")
			b.ReportMetric(ms(walk), "proc-walk-ms")
			b.ReportMetric(float64(walk)/float64(iter), "iter-x-faster")
		})
	}
}
