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

	// Sweeps and bpftool runs alternate, so both see the same machine load;
	// medians of each are compared.
	const rounds = 21
	buf := make([]Sample, 0, 2048)
	sweeps := make([]time.Duration, 0, rounds)
	tools := make([]time.Duration, 0, rounds)
	b.ResetTimer()
	for range b.N {
		for range rounds {
			start := time.Now()
			var err error
			if buf, err = Sweep(buf[:0]); err != nil {
				b.Fatal(err)
			}
			sweeps = append(sweeps, time.Since(start))
			tools = append(tools, bpftoolShow(b))
		}
	}
	b.StopTimer()
	if len(buf) < 1000 {
		b.Fatalf("swept %d programs, loaded 1000", len(buf))
	}
	sweep, bpftool := median(sweeps), median(tools)
	b.ReportMetric(ms(sweep), "ms/sweep")
	b.ReportMetric(float64(sweep.Nanoseconds())/1000/float64(len(buf)), "µs/prog")
	b.ReportMetric(ms(bpftool), "bpftool-ms")
	b.ReportMetric(float64(bpftool)/float64(sweep), "x-faster-than-bpftool")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// bpftoolShow times one whole `bpftool prog show -j` process.
func bpftoolShow(b *testing.B) time.Duration {
	cmd := exec.Command("bpftool", "prog", "show", "-j")
	cmd.Stdout = io.Discard
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("bpftool prog show: %v", err)
	}
	return time.Since(start)
}
