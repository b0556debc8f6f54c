package counters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/store"
)

// The counter loop's tests run in a synctest bubble: time there moves only
// when every goroutine waits, so "stored when the window stopped" and "not
// woken in a day" are told exactly, on the bubble's clock, and the bubble
// fails a test that leaves a goroutine behind.

// fakeExact is an exact mechanism that attaches nothing: its windows stop
// when their time is up (on the bubble's clock) or when a test stops them,
// and read fakeRuns runs.
type fakeExact struct {
	mu      sync.Mutex
	opened  []fakeOpen
	windows map[uint32]*fakeWindow
	refuse  map[uint32]error
}

type fakeOpen struct {
	id uint32
	at time.Time
}

const fakeRuns = 100

func (f *fakeExact) Start(id uint32, window time.Duration) (counterWindow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse[id]; err != nil {
		return nil, err
	}
	w := &fakeWindow{id: id, done: make(chan struct{})}
	w.mu.Lock()
	w.timer = time.AfterFunc(window, func() { w.stop(collectors.StopEnded) })
	w.mu.Unlock()
	f.opened = append(f.opened, fakeOpen{id, time.Now()})
	f.windows[id] = w
	return w, nil
}

func (f *fakeExact) window(id uint32) *fakeWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.windows[id]
}

func (f *fakeExact) opens() []fakeOpen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeOpen(nil), f.opened...)
}

type fakeWindow struct {
	id     uint32
	done   chan struct{}
	mu     sync.Mutex
	timer  *time.Timer
	reason collectors.StopReason
}

func (w *fakeWindow) stop(r collectors.StopReason) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason == collectors.StopNone {
		w.reason = r
		w.timer.Stop()
		close(w.done)
	}
}

func (w *fakeWindow) Done() <-chan struct{} { return w.done }

func (w *fakeWindow) Stopped() collectors.StopReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

func (w *fakeWindow) Stop() { w.stop(collectors.StopStopped) }

func (w *fakeWindow) Read() (collectors.CounterReading, error) {
	return collectors.CounterReading{Target: w.id, Entries: fakeRuns, Exits: fakeRuns, Counted: fakeRuns,
		Values: []collectors.CounterValue{{Event: perfevent.CPUClock, Counter: 5000 * fakeRuns, Enabled: 1, Running: 1}}}, nil
}

func (w *fakeWindow) Close() error { w.Stop(); return nil }

// loopTest is a counter loop over a fixture sampler and a fake exact
// mechanism, inside a bubble.
type loopTest struct {
	c     *Counters
	exact *fakeExact
	progs *sampler.Fixture
	db    *store.DB
	// reads counts the loop's clock reads: each wake reads it.
	reads atomic.Int64
	stop  func()
}

const loopBoot = 1

// openStore opens a store outside the bubble.
func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "bpfperf.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// startLoop starts the counter loop with cfg. Call stop before the
// bubble ends.
func startLoop(t *testing.T, db *store.DB, cfg Config) *loopTest {
	lt := &loopTest{exact: &fakeExact{windows: map[uint32]*fakeWindow{}, refuse: map[uint32]error{}}, progs: sampler.NewFixture(), db: db}
	now := func() time.Time {
		lt.reads.Add(1)
		return time.Now()
	}
	prof := profiling.New(profiling.Config{Every: time.Minute}, nil, nil, time.Now, "")
	lt.c = New(cfg, Deps{Sampler: lt.progs.Sampler, Profiler: prof, Store: db, Logger: slog.New(slog.DiscardHandler), Now: now, Boot: loopBoot})
	ctx, cancel := context.WithCancel(t.Context())
	lt.c.run(ctx, cfg.withDefaults(), collectors.CounterSupport{}, lt.exact, []perfevent.Event{perfevent.CPUClock})
	lt.stop = func() {
		cancel()
		lt.c.Wait()
	}
	synctest.Wait()
	return lt
}

// load puts a loaded program in the fixture.
func (lt *loopTest) load(id uint32, name string) store.InstanceKey {
	lt.progs.Put(sampler.FixtureProgram{Boot: loopBoot, Meta: collectors.Meta{ID: id, Name: name}})
	return store.InstanceKey{Boot: loopBoot, ID: id}
}

func (lt *loopTest) enable(t *testing.T, key store.InstanceKey, name string) {
	t.Helper()
	if tg, err := lt.c.Enable(t.Context(), true, key, name, 0); err != nil || tg.State != "counting" {
		t.Fatalf("enable %s: %+v, %v; want counting", name, tg, err)
	}
}

// target is the listed target id, nil when not listed.
func (lt *loopTest) target(id uint32) *api.CounterTarget {
	for _, tg := range lt.c.List().Targets {
		if tg.ID == id {
			return &tg
		}
	}
	return nil
}

// TestCounterLoopStoresStoppedWindow: a window that stops wakes the loop,
// which stores it at that instant (no poll has to come round first); the
// next window opens exactly when due; a window whose owner let the target
// go drops the target at once.
func TestCounterLoopStoresStoppedWindow(t *testing.T) {
	db := openStore(t)
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, db, Config{Window: 10 * time.Second, Every: time.Minute})
		defer lt.stop()
		key := lt.load(7, "ctr_a")
		t0 := time.Now()
		lt.enable(t, key, "ctr_a")

		time.Sleep(10 * time.Second) // the window's time is up now
		synctest.Wait()
		tg := lt.target(7)
		if tg == nil || tg.State != "idle" || tg.Windows != 1 || tg.Last == nil {
			t.Fatalf("target after its window stopped: %+v, want idle with one window", tg)
		}
		if end := t0.Add(10 * time.Second); !tg.Last.WindowEnd.Equal(end) || tg.Last.Stopped != string(collectors.StopEnded) || tg.Last.CountedRuns != fakeRuns {
			t.Errorf("window %+v, want %d runs, ended at %v (when it stopped)", tg.Last, fakeRuns, end)
		}
		s, ok, err := db.LastCountersOf(key, store.CounterExact)
		if err != nil || !ok || s.Counted != fakeRuns || !s.Time.Equal(t0.Add(10*time.Second)) {
			t.Errorf("stored %+v, %v, %v; want %d runs at the window's end", s, ok, err, fakeRuns)
		}

		// --counters.every: the next window opens at t0+1m, not before.
		time.Sleep(49 * time.Second)
		synctest.Wait()
		if n := len(lt.exact.opens()); n != 1 {
			t.Errorf("%d windows opened by t0+59s, want 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if o := lt.exact.opens(); len(o) != 2 || !o[1].at.Equal(t0.Add(time.Minute)) {
			t.Errorf("windows opened at %v, want the second at t0+1m", o)
		}

		lt.exact.window(7).stop(collectors.StopReleased)
		synctest.Wait()
		if tg := lt.target(7); tg != nil {
			t.Errorf("target %+v still listed after its owner let it go", tg)
		}
		if s, _, _ := db.LastCountersOf(key, store.CounterExact); s.Counted != 2*fakeRuns || !s.Time.Equal(t0.Add(time.Minute)) {
			t.Errorf("stored %+v, want both windows' %d runs at t0+1m", s, 2*fakeRuns)
		}
	})
}

// TestCounterLoopDropsUnloadedIdleTarget: a target between windows whose
// program is unloaded is dropped at the first sampler tick that sees it
// gone, not at its next window.
func TestCounterLoopDropsUnloadedIdleTarget(t *testing.T) {
	db := openStore(t)
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, db, Config{Window: 10 * time.Second, Every: time.Hour})
		defer lt.stop()
		key := lt.load(7, "ctr_a")
		lt.enable(t, key, "ctr_a")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if tg := lt.target(7); tg == nil || tg.State != "idle" {
			t.Fatalf("target %+v, want idle between windows", tg)
		}

		lt.progs.Remove(7)
		lt.progs.Tick(time.Now())
		synctest.Wait()
		if tg := lt.target(7); tg != nil {
			t.Errorf("target %+v still listed after a tick saw its program unloaded", tg)
		}
		if n := len(lt.exact.opens()); n != 1 {
			t.Errorf("%d windows opened, want 1", n)
		}
	})
}

// TestCounterLoopWaitingTakesFailedSlot: with one slot (--counters.max
// 1), matched programs wait while an enabled one counts; when the enabled
// one fails at its next window, a waiting one counts at once, whichever
// target the loop takes first. The order is the map's, so the test runs
// often enough to meet both.
func TestCounterLoopWaitingTakesFailedSlot(t *testing.T) {
	db := openStore(t)
	for range 60 {
		synctest.Test(t, func(t *testing.T) {
			lt := startLoop(t, db, Config{Programs: []string{"ctr_w*"}, Window: 10 * time.Second, Every: time.Minute, Max: 1})
			defer lt.stop()
			key := lt.load(7, "ctr_a")
			lt.enable(t, key, "ctr_a")
			waiting := []uint32{8, 9, 10}
			for _, id := range waiting {
				lt.load(id, "ctr_w")
				lt.c.Appeared(id, "ctr_w")
			}
			time.Sleep(10 * time.Second)
			synctest.Wait()
			for _, id := range waiting {
				if tg := lt.target(id); tg == nil || tg.State != "waiting" {
					t.Fatalf("target %d %+v, want waiting for 7's slot", id, tg)
				}
			}

			lt.exact.mu.Lock()
			lt.exact.refuse[7] = &collectors.CounterError{Op: "count program 7", Reason: collectors.ErrNoBTF}
			lt.exact.mu.Unlock()
			time.Sleep(50 * time.Second) // 7's next window is due
			synctest.Wait()
			if tg := lt.target(7); tg == nil || tg.State != "failed" {
				t.Errorf("target 7 %+v, want failed", tg)
			}
			counting := 0
			for _, id := range waiting {
				if tg := lt.target(id); tg != nil && tg.State == "counting" {
					counting++
				}
			}
			if counting != 1 {
				t.Errorf("%d of the waiting targets counting, want 1 in the slot 7 left: %+v", counting, lt.c.List().Targets)
			}
		})
	}
}

// TestCounterLoopSleepsWhenIdle: with no targets the loop does not wake
// (it reads no clock) for a day, a sampler tick included; nor once its
// last target, between windows, is disabled: no due window and no unload
// watch is left behind.
func TestCounterLoopSleepsWhenIdle(t *testing.T) {
	db := openStore(t)
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, db, Config{Window: 10 * time.Second, Every: time.Minute})
		defer lt.stop()
		sleepsADay := func(when string) {
			t.Helper()
			n := lt.reads.Load()
			lt.load(9, "other") // a program comes: the sampler's generation moves
			lt.progs.Tick(time.Now())
			time.Sleep(24 * time.Hour)
			synctest.Wait()
			if woke := lt.reads.Load() - n; woke != 0 {
				t.Errorf("%s: the loop read the clock %d times in a day, want 0", when, woke)
			}
			lt.progs.Remove(9)
		}
		sleepsADay("no targets ever")

		key := lt.load(7, "ctr_a")
		lt.enable(t, key, "ctr_a")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if tg := lt.target(7); tg == nil || tg.State != "idle" {
			t.Fatalf("target %+v, want idle between windows", tg)
		}
		if _, err := lt.c.Enable(t.Context(), false, key, "ctr_a", 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		sleepsADay("its last target disabled")
	})
}

// TestCounterLoopProbesAgainAfterShortage: exact counting that failed its
// probe at start for want of descriptors is probed again, at most once a
// minute: a request within the minute is refused without a probe, the
// first after it counts; a --counters.programs target that failed for
// the shortage counts again once a probe passes, without being asked.
func TestCounterLoopProbesAgainAfterShortage(t *testing.T) {
	db := openStore(t)
	synctest.Test(t, func(t *testing.T) {
		lt := &loopTest{exact: &fakeExact{windows: map[uint32]*fakeWindow{}, refuse: map[uint32]error{}}, progs: sampler.NewFixture(), db: db}
		cfg := Config{Programs: []string{"ctr_s*"}, Window: 10 * time.Second, Every: time.Minute}
		prof := profiling.New(profiling.Config{Every: time.Minute}, nil, nil, time.Now, "")
		lt.c = New(cfg, Deps{Sampler: lt.progs.Sampler, Profiler: prof, Store: db, Logger: slog.New(slog.DiscardHandler), Now: time.Now, Boot: loopBoot})
		short := fmt.Errorf("load probe target: %w", unix.EMFILE)
		var probes []time.Time
		lt.c.reprobe = func() (exactCounter, error) {
			probes = append(probes, time.Now())
			if len(probes) < 3 {
				return nil, short
			}
			return lt.exact, nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		lt.c.run(ctx, cfg.withDefaults(), collectors.CounterSupport{Exact: short}, nil, []perfevent.Event{perfevent.CPUClock})
		defer func() { cancel(); lt.c.Wait() }()
		synctest.Wait()
		t0 := time.Now()

		// A matched program: its window fails for the shortage after the
		// first probe (at once: none ran since start) fails too.
		lt.load(8, "ctr_s")
		lt.c.Appeared(8, "ctr_s")
		synctest.Wait()
		if tg := lt.target(8); tg == nil || tg.State != "failed" || len(probes) != 1 {
			t.Fatalf("matched target %+v after %d probes, want failed after 1", tg, len(probes))
		}
		// A request within the minute: refused, no probe.
		key := lt.load(7, "ctr_a")
		if _, err := lt.c.Enable(t.Context(), true, key, "ctr_a", 0); !errors.Is(err, errs.CountersUnavailable) || len(probes) != 1 {
			t.Fatalf("enable within the minute: %v after %d probes; want unavailable, 1 probe", err, len(probes))
		}
		// A minute on, the loop probes again for the failed target by
		// itself (it fails: EMFILE still), then a minute later passes.
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(probes) != 2 || probes[1].Sub(t0) != time.Minute {
			t.Fatalf("probes at %v, want a second one a minute after start", probes)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(probes) != 3 {
			t.Fatalf("%d probes, want a third a minute after the second", len(probes))
		}
		if tg := lt.target(8); tg == nil || tg.State != "counting" {
			t.Errorf("matched target %+v after the probe passed, want counting", tg)
		}
		lt.enable(t, key, "ctr_a")
		if st := lt.c.Status(); st == nil || !st.Exact.Available {
			t.Errorf("status %+v, want exact available", st)
		}
	})
}
