package daemon_test

import (
	"math"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestStatsCostStatus: status reports bpf_stats' cost per run and the
// host-wide CPU it costs (runs/s x cost); where stats were already on at
// start (here: held by this test) it says it could not measure, and why.
func TestStatsCostStatus(t *testing.T) {
	privtest.Root(t)
	held, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir())
	held.Close()
	var st api.Status
	d.json(t, &st, "status")
	if sc := st.StatsCost; sc == nil || sc.Measured || !strings.Contains(sc.Detail, "already on") {
		t.Errorf("stats held on at start: stats_cost %+v, want not measured, saying stats were already on", sc)
	}
	d.stop(t, unix.SIGTERM)

	d = startDaemon(t, t.TempDir())
	d.json(t, &st, "status")
	sc := st.StatsCost
	if sc == nil {
		t.Fatal("no stats_cost in status")
	}
	if !sc.Measured {
		// Another test package's daemon may keep stats on.
		t.Logf("not measured here: %s", sc.Detail)
		return
	}
	if sc.NsPerRun <= 0 || sc.OnNsPerRun <= sc.OffNsPerRun || sc.CPUPercent == nil ||
		math.Abs(*sc.CPUPercent-sc.RunsPerSec*sc.NsPerRun/1e7) > 1e-9 {
		t.Errorf("stats_cost %+v: want a positive cost and cpu_percent = runs/s x ns/run", sc)
	}
	out := d.cli(t, "status")
	if !strings.Contains(out, "stats cost:") || !strings.Contains(out, "ns per run") {
		t.Errorf("status does not show the stats cost:\n%s", out)
	}
}
