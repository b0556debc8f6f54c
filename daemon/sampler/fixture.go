package sampler

import (
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// Fixture is a sampler that never sweeps, holding the programs a test puts
// in it: for tests of the rooms that read the sampler (metrics, counters).
type Fixture struct{ *Sampler }

// NewFixture makes an empty fixture.
func NewFixture() *Fixture {
	return &Fixture{&Sampler{progs: map[uint32]*Program{}, lastTag: map[string]string{}, podRunners: map[string][]identity.Identity{}, tickDone: make(chan struct{})}}
}

// FixtureProgram is a program as a fixture holds it.
type FixtureProgram struct {
	Boot     uint32
	Meta     collectors.Meta
	Identity string // its identity key, "" for one not settled
	// The last two sweeps' counters; HavePrev false for one sweep only.
	Cur, Prev     collectors.Sample
	CurAt, PrevAt time.Time
	HavePrev      bool
}

// Put holds p, in place of any program of its id.
func (f *Fixture) Put(p FixtureProgram) *Program {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Its own clock, at its two sweeps: sweep 1 changed it from Prev,
	// and sweep 0 saw it first unless it has no previous sweep.
	prog := &Program{
		key: store.InstanceKey{Boot: p.Boot, ID: p.Meta.ID}, meta: p.Meta, identKey: p.Identity,
		cur: p.Cur, prev: p.Prev, changed: 1, clock: &sweepClock{n: 1, at: p.CurAt, prevAt: p.PrevAt},
	}
	if !p.HavePrev {
		prog.first = 1
	}
	f.progs[p.Meta.ID] = prog
	f.gen++
	return prog
}

// Remove drops the program with kernel id id, as the tick that finds it
// unloaded does: it is leaving until the next Tick (the tick stored).
func (f *Fixture) Remove(id uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.progs[id]; p != nil {
		f.markLeaving(p.key)
	}
	delete(f.progs, id)
	f.gen++
}

// Tick ends a tick at now, as a sweep does: WaitTick returns for it.
func (f *Fixture) Tick(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastTick = now
	f.tickStored()
}
