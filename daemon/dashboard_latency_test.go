package daemon_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/store"
)

// TestDashboardLatency: the program page draws a program's stored latency
// windows: p50, p99 and p99.9 over time and the newest window's runs by
// power of two. This host refuses fentry, so the windows are written into
// the store while the daemon is stopped (TestLatencyEndToEnd proves in the
// VM that the daemon stores what it timed); the page reads them through
// the daemon like any others.
func TestDashboardLatency(t *testing.T) {
	privtest.Root(t)
	state := t.TempDir()
	d := startDaemon(t, state)
	name := uniqueName("dash_lat")
	p, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitShown(t, d, name)
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	db, err := store.Open(filepath.Join(state, daemon.StoreFile), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	progs, err := db.Programs()
	if err != nil {
		t.Fatal(err)
	}
	var key store.InstanceKey
	for _, rec := range progs {
		if rec.Name == name {
			key = rec.Key
		}
	}
	end := time.Now().Add(-10 * time.Minute)
	for i := range 3 {
		w := store.LatencyWindow{Key: key, End: end.Add(time.Duration(i) * time.Minute), Length: 10 * time.Second,
			Entries: 1000, Timed: 1000, SumNs: 1_200_000, MaxNs: uint64(60_000 * (i + 1)), FloorNs: 100, AddedNs: 800,
			Quantiles: [4]uint64{1000, 1300, uint64(20_000 * (i + 1)), uint64(50_000 * (i + 1))}}
		w.Octaves[9], w.Octaves[10], w.Octaves[14] = 900, 90, 10
		if i == 2 { // the newest counted cycles per run too
			w.PerRun = &store.LatencyEvent{Event: uint8(perfevent.Cycles), Counted: 990, Missed: 10, Sum: 4_000_000, Max: 200_000, Floor: 500,
				Quantiles: [4]uint64{3500, 4500, 60_500, 150_500}}
		}
		if err := db.WriteLatency(w); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	web := freeAddr(t)
	d = startDaemon(t, state, "--web.listen-address", web)
	waitShown(t, d, name)
	b := newBrowser(t, "http://"+web+"/")
	page := b.dom(t, fmt.Sprintf("program.html?prog=%d", key.ID), "program-latency")
	lat := page[strings.Index(page, `<div id="latency">`):]
	lat = lat[:strings.Index(lat, "<h2>")]
	if m := regexp.MustCompile(`class="chart" data-points="(\d+)"`).FindStringSubmatch(lat); m == nil || m[1] != "9" {
		t.Errorf("latency chart: drew %v points, want 9 (p50, p99, p99.9 of 3 windows):\n%s", m, lat)
	}
	for _, want := range []string{"p99 59.90 µs", "p99.9 149.90 µs", "1,000 runs", ">900<", ">90<", ">10<", "timing floor of 100.0 ns",
		"cycles per run: mean 3,540, p50 3,000, p90 4,000, p99 60,000, p99.9 150,000, max 199,500 over 990 runs (less the timing's own 500)"} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency section lacks %q:\n%s", want, lat)
		}
	}
	if n := strings.Count(lat, `class="bar"`); n != 3 {
		t.Errorf("%d distribution bars, want 3 (three powers of two hold runs)", n)
	}
}
