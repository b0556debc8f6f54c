package collectors

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkPinScan times one scan of a bpffs holding 1,000 pinned maps
// (a Cilium node pins hundreds to thousands), as the daemon scans at every
// owners refresh: reading every pin (ScanPins, what each scan did before
// PinScanner) against a scanner that has seen them all (a stat a pin),
// alternated within each round; medians and their ratio.
func BenchmarkPinScan(b *testing.B) {
	privtest.Root(b)
	root := mountBPFFS(b)
	const pins = 1000
	for i := range pins {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
		if err != nil {
			b.Fatal(err)
		}
		err = m.Pin(filepath.Join(root, fmt.Sprintf("map_%04d", i)))
		m.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	warm := NewPinScanner(root)
	warm.Scan()
	var cold, known []time.Duration
	for range b.N {
		for range 9 {
			start := time.Now()
			if p := ScanPins(root); len(p.Maps) != pins || p.Opened != pins {
				b.Fatalf("full scan: %d maps, %d opened, want %d", len(p.Maps), p.Opened, pins)
			}
			cold = append(cold, time.Since(start))
			start = time.Now()
			if p := warm.Scan(); len(p.Maps) != pins || p.Opened != 0 {
				b.Fatalf("scan of known pins: %d maps, %d opened, want %d and 0", len(p.Maps), p.Opened, pins)
			}
			known = append(known, time.Since(start))
		}
	}
	b.ReportMetric(ms(median(cold)), "read-all-ms")
	b.ReportMetric(ms(median(known)), "known-ms")
	b.ReportMetric(float64(median(cold))/float64(median(known)), "x-faster")
}
