package daemon_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// Ten days of history written fast into a store: history with a coarse step
// reads rollups and still gives exact counters and rates.
func TestHistoryFromRollups(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	state := t.TempDir()
	db, err := store.Open(filepath.Join(state, daemon.StoreFile), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(-time.Minute).Truncate(time.Second)
	start := end.Add(-10 * 24 * time.Hour)
	if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Steady: 1}, Start: start, Duration: end.Sub(start), Batch: 3600, BootID: "old-boot", FirstID: 4_000_000}); err != nil {
		t.Fatal(err)
	}
	progs, _ := db.Programs()
	raw, _ := db.Series(progs[0].Key, start, end)
	db.Close()
	name := progs[0].Name

	d := startDaemon(t, state)
	var hours, minutes, all []api.HistoryPoint
	d.json(t, &hours, "history", name, "--since", "11d", "--step", "1h")
	d.json(t, &minutes, "history", name, "--since", "2d", "--step", "1m")
	d.json(t, &all, "history", name, "--since", "2h")

	if len(hours) < 239 || len(hours) > 241 {
		t.Errorf("10 days at --step 1h: %d points, want 240", len(hours))
	}
	if len(minutes) < 2*1440-2 || len(minutes) > 2*1440+1 {
		t.Errorf("2 days at --step 1m: %d points, want 2880", len(minutes))
	}
	if len(all) < 7100 {
		t.Errorf("2 hours raw: %d points, want about 7200", len(all))
	}
	// Each resolution ends on the same, newest raw sample: rollups keep
	// counters exact.
	last := raw[len(raw)-1]
	for what, pts := range map[string][]api.HistoryPoint{"hours": hours, "minutes": minutes, "raw": all} {
		p := pts[len(pts)-1]
		if p.RunCnt != last.Values[store.ColRunCnt] || p.RunTimeNs != last.Values[store.ColRunTimeNs] {
			t.Errorf("%s: last point %d runs, %d ns; raw says %d, %d", what, p.RunCnt, p.RunTimeNs, last.Values[store.ColRunCnt], last.Values[store.ColRunTimeNs])
		}
	}
	// Runs over a day read from hour rollups equal the raw difference.
	dayAgo := end.Add(-24 * time.Hour)
	var fromHours, fromRaw uint64
	for _, p := range hours {
		if !p.Time.Before(dayAgo.Truncate(time.Hour)) {
			fromHours = p.RunCnt
			break
		}
	}
	for _, p := range raw {
		if !p.Time.Before(dayAgo.Truncate(time.Hour).Add(time.Hour)) {
			break
		}
		fromRaw = p.Values[store.ColRunCnt]
	}
	if fromHours != fromRaw {
		t.Errorf("run_cnt at the end of the hour a day ago: %d from rollups, %d raw", fromHours, fromRaw)
	}
}
