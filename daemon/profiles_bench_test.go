package daemon_test

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkDaemonProfiling measures what continuous profiling costs the
// daemon: its CPU (relative to one core, from /proc/<pid>/stat) over 62 s
// at the default 1 s interval, with profiling off (--profile.every 0) and
// then on at the defaults (one 60 s window a minute at 99 Hz on every
// CPU), while a BPF program runs flat out in this process; and the stored
// size of a window, scaled to an hour. The kernel's own cost per sample
// (charged to whichever task was interrupted, not to the daemon) is
// profile's BenchmarkSampleInterrupt.
//
//	go test -run '^$' -bench DaemonProfiling -benchtime 1x ./daemon/
func BenchmarkDaemonProfiling(b *testing.B) {
	privtest.Root(b)
	hotProgram(b, "bench_prof_hot")
	const measure = 62 * time.Second
	for range b.N {
		cpu := map[bool]float64{}
		var window *api.ProfilingStatus
		for _, on := range []bool{false, true} {
			args := []string{"--interval", "1s", "--profile.every", "0"}
			if on {
				args = []string{"--interval", "1s"}
			}
			d := startDaemon(b, b.TempDir(), args...)
			cpu0, at0 := procCPU(b, d.cmd.Process.Pid), time.Now()
			time.Sleep(measure)
			cpu[on] = (procCPU(b, d.cmd.Process.Pid) - cpu0).Seconds() / time.Since(at0).Seconds() * 100
			if on {
				var st api.Status
				if err := d.query(&st, "status"); err != nil {
					b.Fatal(err)
				}
				window = st.Profiling
			}
			d.cmd.Process.Kill()
			<-d.done
		}
		if window == nil || window.Windows == 0 {
			b.Fatalf("no profile window was stored: %+v", window)
		}
		b.ReportMetric(cpu[false], "cpu-%-off")
		b.ReportMetric(cpu[true], "cpu-%-on")
		b.ReportMetric(cpu[true]-cpu[false], "cpu-%-profiling")
		b.ReportMetric(float64(window.LastProfileBytes)*float64(time.Hour/time.Minute)/1e6, "MB/hour")
		b.ReportMetric(float64(window.LastProfileSamples), "samples/window")
		b.ReportMetric(window.LastBuildMs, "build-ms")
	}
}
