package daemon_test

import (
	"os"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestSoak runs bpfperfd time-compressed, 1,000 programs (100 busy) at a
// 100 ms interval with profiling on, for BPFPERF_SOAK (e.g. 6m: an hour
// of 1 s ticks), and checks that its CPU and RSS stay flat: the last
// third's median CPU within 25% (plus 0.2 points of noise) of the first
// third's, and the last third's median RSS within 8 MiB of the first
// third's after the first window (medians: the runtime hands freed heap
// back in steps of several MiB).
// `make soak` runs it; without BPFPERF_SOAK it skips (it is long).
func TestSoak(t *testing.T) {
	length, err := time.ParseDuration(os.Getenv("BPFPERF_SOAK"))
	if err != nil {
		t.Skip("a long run: set BPFPERF_SOAK=6m (make soak does)")
	}
	privtest.Root(t)
	progs := loadFilters(t, "soak_", 1000)
	d := startDaemon(t, t.TempDir(), "--interval", "100ms")
	pid := d.cmd.Process.Pid
	const window = 30 * time.Second
	var cpus []float64
	var rss []int64
	end := time.Now().Add(length)
	for time.Now().Before(end) {
		cpu0, at0 := procCPU(t, pid), time.Now()
		for time.Since(at0) < window {
			for _, p := range progs[:100] {
				privtest.Run(p, 3)
			}
			time.Sleep(time.Second)
		}
		cpus = append(cpus, (procCPU(t, pid)-cpu0).Seconds()/time.Since(at0).Seconds()*100)
		rss = append(rss, rssBytes(t, pid))
		t.Logf("%3.0fs: CPU %.2f%% of one core, RSS %.1f MiB", time.Since(end.Add(-length)).Seconds(), cpus[len(cpus)-1], float64(rss[len(rss)-1])/(1<<20))
	}
	if len(cpus) < 6 {
		t.Fatalf("BPFPERF_SOAK=%v gives %d windows of %v, want at least 6", length, len(cpus), window)
	}
	third := len(cpus) / 3
	first, last := median(cpus[:third]), median(cpus[len(cpus)-third:])
	mib := make([]float64, len(rss))
	for i, r := range rss {
		mib[i] = float64(r) / (1 << 20)
	}
	rssFirst, rssLast := median(mib[1:1+third]), median(mib[len(mib)-third:])
	t.Logf("median CPU: first third %.2f%%, last third %.2f%%; median RSS %.1f -> %.1f MiB", first, last, rssFirst, rssLast)
	if last > first*1.25+0.2 {
		t.Errorf("CPU grew: median %.2f%% in the first third, %.2f%% in the last", first, last)
	}
	if rssLast > rssFirst+8 {
		t.Errorf("median RSS grew from %.1f to %.1f MiB", rssFirst, rssLast)
	}
}
