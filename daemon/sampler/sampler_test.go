package sampler

import (
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/holders"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/store"
)

// TestChangedOnlySweep runs the sampler's ticks on real programs with the
// iterator's changed-only sweep, at a simulated 1 s interval: most ticks
// read only the programs that ran, yet every idle program is stored at its
// first tick and once a heartbeat period after (exactly two points in 61
// ticks), the busy program on every tick with its rate, an unloaded
// program is found in the tick after (all programs read again that tick),
// and a program loaded later is taken in.
func TestChangedOnlySweep(t *testing.T) {
	statsOn(t)
	log := discard
	t0 := time.Now().Truncate(time.Second)
	w, err := NewSweeper(SweepConfig{Mode: SweepIter, Logger: log}, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	db, err := store.Open(filepath.Join(t.TempDir(), "bpfperf.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(Config{Interval: time.Second, OwnersEvery: time.Hour, Logger: log}, w, holders.New("/proc", log), db, "boot", 1, Hooks{})
	if err != nil {
		t.Fatal(err)
	}

	load := func(name string) (*ebpf.Program, uint32) {
		p, err := privtest.LoadSocketFilter(name)
		return p, privtest.Keep(t, p, err)
	}
	var idle []*ebpf.Program
	var idleIDs []uint32
	for range 30 {
		p, id := load("changed_idle")
		idle, idleIDs = append(idle, p), append(idleIDs, id)
	}
	busy, busyID := load("changed_busy")
	// One of the daemon's own programs, run every tick as its iterator
	// and load-record programs are, until it is closed at ownGoneAt.
	own, ownID := load("changed_own")
	forgetOwn := collectors.MarkOwn(own)
	const ownGoneAt, ownRuns = 45, 2

	var reads []int
	unloadAt, loadAt := 30, 40
	gone, late := idleIDs[5], uint32(0)
	for i := 0; i <= 61; i++ {
		if err := privtest.Run(busy, 3); err != nil {
			t.Fatal(err)
		}
		if i < ownGoneAt {
			if err := privtest.Run(own, ownRuns); err != nil {
				t.Fatal(err)
			}
		} else if i == ownGoneAt {
			forgetOwn()
			own.Close()
		}
		switch i {
		case unloadAt:
			idle[5].Close()
		case loadAt:
			_, late = load("changed_late")
		}
		now := t0.Add(time.Duration(i) * time.Second)
		if err := s.Tick(now, i == 0); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
		st := s.Status()
		reads = append(reads, st.LastSweepRead)
		s.Read(func(v View) {
			switch {
			case i == unloadAt && v.Program(gone) != nil:
				t.Errorf("tick %d: program %d unloaded before it is still held", i, gone)
			case i == loadAt && v.Program(late) == nil:
				t.Errorf("tick %d: program %d loaded before it is not held", i, late)
			}
			if i == unloadAt && st.LastSweepRead < st.Programs {
				t.Errorf("tick %d, a program gone: read %d of %d programs, want all", i, st.LastSweepRead, st.Programs)
			}
			if i > 0 {
				p := v.Program(busyID)
				cur, at := p.Latest()
				prev, prevAt, ok := p.Previous()
				if !ok || cur.RunCnt-prev.RunCnt != 3 || at.Sub(prevAt) != time.Second || !at.Equal(now) {
					t.Fatalf("tick %d: busy program %d runs %d -> %d at %v -> %v (ok %v), want 3 more a second later", i, busyID, prev.RunCnt, cur.RunCnt, prevAt, at, ok)
				}
				q := v.Program(idleIDs[0])
				qcur, _ := q.Latest()
				qprev, qprevAt, ok := q.Previous()
				if !ok || qcur != qprev || !qprevAt.Equal(now.Add(-time.Second)) {
					t.Fatalf("tick %d: idle program %d: latest %+v, previous %+v at %v (ok %v), want the same a second before", i, idleIDs[0], qcur, qprev, qprevAt, ok)
				}
			}
		})
	}
	if m := median(reads[1:]); m > len(idle)/3 {
		t.Errorf("median tick read %d programs (%v), want few: the busy one, the iterator, the host's busy ones", m, reads)
	}

	// Each idle program: its first tick and its heartbeat.
	for _, id := range idleIDs {
		if id == gone {
			continue
		}
		pts, err := db.Series(store.InstanceKey{Boot: 1, ID: id}, t0, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) != 2 || pts[0].Values != pts[1].Values || !pts[0].Time.Equal(t0) {
			t.Errorf("idle program %d stored at %v, want its first tick and one heartbeat, equal", id, pts)
		}
	}
	pts, err := db.Series(store.InstanceKey{Boot: 1, ID: busyID}, t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 62 {
		t.Errorf("busy program stored %d times in 62 ticks, want every tick", len(pts))
	}
	// The daemon's own busy program: its first tick, its heartbeat if it
	// came before it went, and its last counters at the tick that found
	// it gone, not every tick.
	pts, err = db.Series(store.InstanceKey{Boot: 1, ID: ownID}, t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pts); n < 2 || n > 3 || !pts[0].Time.Equal(t0) || !pts[n-1].Time.Equal(t0.Add(ownGoneAt*time.Second)) || pts[n-1].Values[1] != ownGoneAt*ownRuns {
		t.Errorf("the daemon's own program stored %d times: %v; want its first tick, at most its heartbeat, and %d runs at tick %d when it went", n, pts, ownGoneAt*ownRuns, ownGoneAt)
	}
	progs, err := db.Programs()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(progs, func(p store.Program) bool { return p.ID == gone })
	if i < 0 {
		t.Fatalf("program %d has no store record", gone)
	}
	if want := t0.Add(time.Duration(unloadAt) * time.Second); !progs[i].UnloadedAt.Equal(want) {
		t.Errorf("program %d unloaded before tick %d: stored as unloaded at %v, want %v", gone, unloadAt, progs[i].UnloadedAt, want)
	}
}

// statsOn turns run-time stats on through a stats fd (root only) until
// the test ends, holding the host's stats lock.
func statsOn(t *testing.T) {
	t.Helper()
	privtest.Root(t)
	privtest.LockStats(t)
	stats, err := collectors.EnableStats(collectors.StatsConfig{Mode: "fd"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stats.Restore() })
}

// discard is a logger that writes nothing.
var discard = slog.New(slog.DiscardHandler)

func median(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
