package query

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// The documents are tested here on a real store and a sampler fixture,
// with nothing else of the daemon running: that a room reads alone.

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func ident(name, attach string) string {
	return identity.Identity{Type: "tracepoint", Name: name, Attach: attach, Runner: "runqlat"}.Key()
}

func samples(key store.InstanceKey, runs, ns uint64) []store.Sample {
	var s store.Sample
	s.Key = key
	s.Values[store.ColRunTimeNs], s.Values[store.ColRunCnt] = ns, runs
	return []store.Sample{s}
}

// TestResolveNames: libbpf-tools' runqlat loads handle__sched_wakeup and
// handle__sched_wakeup_new, which the kernel cuts to the same 15
// characters. A full name, an id and an identity each pick one; the cut
// name is ambiguous and the error names both.
func TestResolveNames(t *testing.T) {
	db := openStore(t)
	live := sampler.NewFixture()
	names := []string{"handle__sched_wakeup", "handle__sched_wakeup_new"}
	var keys []string
	var loaded []store.Program
	for i, name := range names {
		id := uint32(10 + i)
		k := ident(name, "tracepoint sched/"+strings.TrimPrefix(name, "handle__"))
		keys = append(keys, k)
		meta := collectors.Meta{ID: id, Type: "tracepoint", Name: name, KernelName: name[:15], Tag: "aaaa"}
		live.Put(sampler.FixtureProgram{Meta: meta, Identity: k, CurAt: t0})
		loaded = append(loaded, store.Program{Key: store.InstanceKey{ID: id}, ID: id, Name: name, KernelName: name[:15], Type: "tracepoint", Tag: "aaaa", Identity: k, FirstSeen: t0})
	}
	if err := db.WriteTick(store.Tick{Time: t0, Loaded: loaded}); err != nil {
		t.Fatal(err)
	}
	q := &Query{Store: db, Sampler: live, Now: func() time.Time { return t0.Add(time.Minute) }}

	for ref, want := range map[string]uint32{
		"handle__sched_wakeup":     10,
		"handle__sched_wakeup_new": 11,
		"11":                       11,
		identity.ShortID(keys[1]):  11,
		keys[0]:                    10,
	} {
		in, err := q.ResolveOne(ref)
		if err != nil || in.Rec.ID != want || in.Live == nil {
			t.Errorf("ResolveOne(%q) = id %d (live %v), %v; want loaded id %d", ref, in.Rec.ID, in.Live != nil, err, want)
		}
	}
	_, err := q.ResolveOne("handle__sched_w")
	if !errors.Is(err, errs.AmbiguousProgram) || !strings.Contains(err.Error(), "10 (identity "+identity.ShortID(keys[0])) || !strings.Contains(err.Error(), "11 (identity ") {
		t.Errorf("the kernel's cut name: %v; want ambiguous, naming ids 10 and 11 with their identities", err)
	}
	if _, err := q.Resolve("handle__sched_switch"); !errors.Is(err, errs.UnknownProgram) {
		t.Errorf("an unknown name: %v, want errs.UnknownProgram", err)
	}
}

// TestHistoryAcrossReload: one program's history is its identity's, across
// a reload (a new id and tag): points oldest first, the reload's first
// point marked and without rates (its counters restart), the rest with
// runs/s and ns/run between consecutive points, and the points stored
// after a stats_duty event marked estimated. A program of another
// identity that shares the name stays out of it.
func TestHistoryAcrossReload(t *testing.T) {
	db := openStore(t)
	k := ident("handle__sched_switch", "tracepoint sched/sched_switch")
	other := ident("handle__sched_switch", "raw_tracepoint sched_switch")
	v1 := store.Program{Key: store.InstanceKey{ID: 20}, ID: 20, Name: "handle__sched_switch", Type: "tracepoint", Tag: "aaaa", Identity: k, FirstSeen: t0}
	v2 := store.Program{Key: store.InstanceKey{ID: 21}, ID: 21, Name: "handle__sched_switch", Type: "tracepoint", Tag: "bbbb", Identity: k, FirstSeen: t0.Add(4 * time.Second)}
	stranger := store.Program{Key: store.InstanceKey{ID: 30}, ID: 30, Name: "handle__sched_switch", Type: "tracepoint", Tag: "cccc", Identity: other, FirstSeen: t0.Add(4 * time.Second)}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ticks := []store.Tick{
		{Time: at(0), Loaded: []store.Program{v1}, Events: []store.Event{{Time: at(0), Kind: "daemon_start"}}},
		{Time: at(1), Samples: samples(v1.Key, 100, 10_000)},
		{Time: at(2), Samples: samples(v1.Key, 300, 30_000)},
		{Time: at(3), Samples: samples(v1.Key, 400, 50_000), Unloaded: []store.InstanceKey{v1.Key}},
		{Time: at(4), Loaded: []store.Program{v2, stranger}, Events: []store.Event{{Time: at(4), Kind: EventStatsDuty, Detail: "50%"}}},
		{Time: at(5), Samples: append(samples(v2.Key, 50, 25_000), samples(stranger.Key, 7, 7)...)},
		{Time: at(7), Samples: append(samples(v2.Key, 250, 45_000), samples(stranger.Key, 9, 9)...)},
	}
	for _, tk := range ticks {
		if err := db.WriteTick(tk); err != nil {
			t.Fatal(err)
		}
	}
	q := &Query{Store: db, Sampler: sampler.NewFixture(), Now: func() time.Time { return at(60) }}
	h, err := q.History(identity.ShortID(k), t0, at(60), 0)
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		id            uint32
		runs          uint64
		reload, est   bool
		perSec, avgNs float64 // 0: absent
	}
	want := []point{
		{id: 20, runs: 100},
		{id: 20, runs: 300, perSec: 200, avgNs: 100},
		{id: 20, runs: 400, perSec: 100, avgNs: 200},
		{id: 21, runs: 50, reload: true, est: true},
		{id: 21, runs: 250, est: true, perSec: 100, avgNs: 100},
	}
	if len(h.Points) != len(want) {
		t.Fatalf("%d points, want %d: %+v", len(h.Points), len(want), h.Points)
	}
	val := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	for i, w := range want {
		p := h.Points[i]
		got := point{p.ID, p.RunCnt, p.Reload, p.Estimated, val(p.RunsPerSec), val(p.AvgNsPerRun)}
		if got != w {
			t.Errorf("point %d: %+v, want %+v", i, got, w)
		}
	}
	// By name, both identities are found: they overlap in time, so
	// the name does not pick one series.
	if _, err := q.History("handle__sched_switch", t0, at(60), 0); !errors.Is(err, errs.AmbiguousProgram) {
		t.Errorf("history by a name two loaded programs share: %v, want ambiguous", err)
	}
}

// TestRowsWaitForTheUnloadToBeStored: the sampler lets go of an unloaded
// program in memory a store write before the store marks it unloaded and
// keeps its unloaded event. progs --all in between listed it as not
// loaded, and a user who then asked for its events found no unloaded one
// (CI run 34, TestProgramsComeAndGoWithoutBeingHeld). Rows answers as of
// the stored tick.
func TestRowsWaitForTheUnloadToBeStored(t *testing.T) {
	db := openStore(t)
	live := sampler.NewFixture()
	key := store.InstanceKey{Boot: 1, ID: 7}
	meta := collectors.Meta{ID: 7, Type: "socket_filter", Name: "leaving", Tag: "bbbb"}
	live.Put(sampler.FixtureProgram{Boot: 1, Meta: meta, CurAt: t0})
	rec := store.Program{Key: key, ID: 7, Name: "leaving", Type: "socket_filter", Tag: "bbbb", FirstSeen: t0}
	if err := db.WriteTick(store.Tick{Time: t0, Loaded: []store.Program{rec}}); err != nil {
		t.Fatal(err)
	}
	q := &Query{Store: db, Sampler: live, Now: func() time.Time { return t0.Add(time.Minute) }}

	gone := t0.Add(time.Second)
	live.Remove(7) // the tick found it gone; its write has not finished
	type answer struct {
		rows []api.ProgRow
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		rows, err := q.Rows(true)
		answered <- answer{rows, err}
	}()
	select {
	case a := <-answered:
		t.Fatalf("Rows answered %+v (%v) while the unload was not stored; want it to wait for the tick", a.rows, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	tick := store.Tick{Time: gone, Unloaded: []store.InstanceKey{key}, Events: []store.Event{{Time: gone, Kind: "unloaded", ID: 7, Name: "leaving", Tag: "bbbb"}}}
	if err := db.WriteTick(tick); err != nil {
		t.Fatal(err)
	}
	live.Tick(gone)
	a := <-answered
	if a.err != nil || len(a.rows) != 1 || a.rows[0].Loaded || !a.rows[0].UnloadedAt.Equal(gone) {
		t.Fatalf("Rows(all) = %+v, %v; want program 7 unloaded at %v", a.rows, a.err, gone)
	}
	events, err := q.Events(t0, gone, "")
	if err != nil || len(events) != 1 || events[0].Kind != "unloaded" || events[0].ID != 7 {
		t.Errorf("events of program 7 = %+v, %v; want its unloaded event", events, err)
	}
}
