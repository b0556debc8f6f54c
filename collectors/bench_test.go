package collectors

import (
	"fmt"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkSweep1000 sweeps a host with 1000 extra socket filters loaded and
// compares one sweep with one `bpftool prog show -j` over the same programs.
func BenchmarkSweep1000(b *testing.B) {
	privtest.Root(b)
	for i := range 1000 {
		prog, err := privtest.LoadSocketFilter(fmt.Sprintf("bench_%d", i))
		if err != nil {
			b.Fatalf("load program %d: %v", i, err)
		}
		defer prog.Close()
	}

	buf := make([]Sample, 0, 2048)
	b.ResetTimer()
	for range b.N {
		var err error
		if buf, err = Sweep(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if len(buf) < 1000 {
		b.Fatalf("swept %d programs, loaded 1000", len(buf))
	}
	sweep := b.Elapsed() / time.Duration(b.N)
	bpftool := bpftoolShowMedian(b, 7)
	b.ReportMetric(ms(sweep), "ms/sweep")
	b.ReportMetric(float64(sweep.Nanoseconds())/1000/float64(len(buf)), "µs/prog")
	b.ReportMetric(ms(bpftool), "bpftool-ms")
	b.ReportMetric(float64(bpftool)/float64(sweep), "x-faster-than-bpftool")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// bpftoolShowMedian times whole `bpftool prog show -j` processes.
func bpftoolShowMedian(b *testing.B, runs int) time.Duration {
	times := make([]time.Duration, runs)
	for i := range times {
		cmd := exec.Command("bpftool", "prog", "show", "-j")
		cmd.Stdout = io.Discard
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("bpftool prog show: %v", err)
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[runs/2]
}
