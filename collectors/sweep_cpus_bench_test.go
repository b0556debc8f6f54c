package collectors

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// BenchmarkSweepCPUsInVM runs BenchmarkSweepMethods at 1,000 programs in
// the test VM booted with 2, 8 and 16 CPUs, bpftool beside it (the host's,
// with its libraries): the kernel sums each program's stats over every
// possible CPU, so a sweep grows with the CPU count, and bpftool's with it.
// The VM is emulated (TCG), so its times are many times the host's: read
// the trend over CPUs and the ratio to bpftool at each, not the
// milliseconds.
func BenchmarkSweepCPUsInVM(b *testing.B) {
	tool, err := exec.LookPath("bpftool")
	if err != nil {
		b.Skipf("bpftool is not installed: %v", err)
	}
	files, err := vmtest.HostBinary(tool)
	if err != nil {
		b.Fatal(err)
	}
	for _, cpus := range []int{2, 8, 16} {
		b.Run(fmt.Sprintf("cpus=%d", cpus), func(b *testing.B) {
			cfg := vmtest.Config{CPUs: cpus, Memory: "2G", Timeout: 8 * time.Minute, Files: files}
			res := vmtest.RunTests(b, cfg, nil, "-test.run", "^$",
				"-test.bench", "^BenchmarkSweepMethods$/^progs=1000$", "-test.benchtime", "1x")
			m := vmtest.BenchMetrics(res.Output, "BenchmarkSweepMethods/progs=1000")
			if m == nil {
				b.Fatalf("no result from BenchmarkSweepMethods in the VM:\n%s", res.Output)
			}
			for unit, v := range m {
				if unit != "ns/op" {
					b.ReportMetric(v, unit)
				}
			}
		})
	}
}
