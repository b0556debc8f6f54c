package netspace_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/netspace"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkScan times one Attach, what each owners scan of the daemon
// does while a network program is loaded, with 1, 10 and 50 pod-like
// namespaces more than the host has (each a veth peer eth0; one with a
// tcx link, so that its devices are queried too): the median of 9, and
// per namespace entered.
func BenchmarkScan(b *testing.B) {
	needTools(b)
	prog, _ := load(b, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1)
	sc, err := netspace.New(netspace.Config{})
	if err != nil {
		b.Fatal(err)
	}
	made := 0
	for _, n := range []int{1, 10, 50} {
		// Made here, not in the sub-benchmark: each size adds to the
		// last one's, all removed when the benchmark ends.
		for ; made < n; made++ {
			ns := privtest.VethIntoNetns(b)
			if made > 0 {
				continue
			}
			var l link.Link
			if err := privtest.InNetns("/run/netns/"+ns.Name, func() (err error) {
				l, err = link.AttachTCX(link.TCXOptions{Program: prog, Interface: ns.Index, Attach: ebpf.AttachTCXIngress})
				return err
			}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
		}
		b.Run(fmt.Sprintf("netns=%d", n), func(sb *testing.B) {
			var took []time.Duration
			entered := 0
			for range sb.N {
				for range 9 {
					links, err := collectors.Links()
					if err != nil {
						sb.Fatal(err)
					}
					if _, err := sc.Attach(links, true); err != nil {
						sb.Fatal(err)
					}
					took = append(took, sc.Last().Took)
					entered = sc.Last().Namespaces
				}
			}
			slices.Sort(took)
			med := took[len(took)/2]
			sb.ReportMetric(float64(med.Microseconds())/1000, "scan-ms")
			sb.ReportMetric(float64(med.Microseconds())/float64(max(entered, 1)), "us/netns")
			sb.ReportMetric(float64(entered), "netns")
		})
	}
}
