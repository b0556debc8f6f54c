package sampler

import (
	"context"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/store"
)

// Read calls fn with a view of what the sampler holds, under its read
// lock: ticks wait until fn returns, so fn should be quick and must not
// call Read again. Neither the view nor a *Program it gives may be read
// after fn returns (a *Program kept to compare with those of a later Read
// is the same pointer while the instance stays loaded).
func (s *Sampler) Read(fn func(View)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(View{s})
}

// View is the sampler's state as Read hands it out.
type View struct{ s *Sampler }

// Program is the loaded program with kernel id id, or nil.
func (v View) Program(id uint32) *Program { return v.s.progs[id] }

// Live is the program instance key names when it is loaded now, or nil.
func (v View) Live(key store.InstanceKey) *Program {
	if p := v.s.progs[key.ID]; p != nil && p.key == key {
		return p
	}
	return nil
}

// Programs are the loaded programs by kernel id, in no order.
func (v View) Programs() iter.Seq2[uint32, *Program] {
	return func(yield func(uint32, *Program) bool) {
		for id, p := range v.s.progs {
			if !yield(id, p) {
				return
			}
		}
	}
}

// LeavingNow copies the instances the tick now being stored found gone:
// their unloaded marks and events are not in the store yet. For such a
// key, the returned func gives a channel closed once they are (or once
// the write failed and the tick waits in the backlog).
func (v View) LeavingNow() func(store.InstanceKey) (done <-chan struct{}, ok bool) {
	keys, done := maps.Clone(v.s.leaving), v.s.tickDone
	return func(k store.InstanceKey) (<-chan struct{}, bool) {
		if keys[k] {
			return done, true
		}
		return nil, false
	}
}

// Len is how many programs are loaded.
func (v View) Len() int { return len(v.s.progs) }

// LastTick is when the last tick swept (the daemon's clock).
func (v View) LastTick() time.Time { return v.s.lastTick }

// Generation changes whenever a program comes or goes, or owners are read
// again: a reader that keeps something built from the programs rebuilds
// it only when this moved.
func (v View) Generation() uint64 { return v.s.gen }

// Moved are the last tick's programs whose run count changed.
func (v View) Moved() []*Program { return v.s.moved }

// Carried says the last tick read no counters of its own: stats were off
// all through it under a duty cycle, and the programs that moved moved at
// the last on part's rates (DutyCycle.Carried).
func (v View) Carried() bool { return v.s.carriedRates }

// IterID is the sweep iterator's own program's id, 0 without one.
func (v View) IterID() uint32 { return v.s.sweeper.IterID() }

// Records are the loaded programs as the store records them.
func (v View) Records() []store.Program {
	var recs []store.Program
	for _, p := range v.s.progs {
		if rec, err := v.s.makeRecord(p, p.firstSeen); err == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// HostRunsPerSec is every program's runs over the last two sweeps, per
// second: the last tick's runs (tickRuns, summed over the programs that
// moved, the rest adding none) over the time between the sweeps.
func (v View) HostRunsPerSec() float64 {
	r, _ := api.PerSecond(float64(v.s.tickRuns), v.s.clock.at.Sub(v.s.clock.prevAt))
	return r
}

// Status is how the sampler runs, for bpfperf status.
type Status struct {
	Programs             int
	LastTick             time.Time
	LastSweep, LastWrite time.Duration
	// LastSweepRead is how many programs the last sweep read (all, or
	// those that changed).
	LastSweepRead int
	LastErr       error
	// Skipped programs the last sweep could not read, and why the first.
	Skipped    int
	SkipReason string
	// How programs and holders are read, in words; the duty cycle's
	// state, "" with no cycle (stats on all the time).
	Sweep, SweepDetail, Holders, Duty string
	// Loaders says how programs' loaders are known.
	Loaders string
	// DutyPercent is the share of each interval stats are on (100 with no
	// cycle); under a budget, BudgetPercent and what full-time stats cost
	// the programs over the last interval (FullCostPercent), in % of one
	// CPU, else 0.
	DutyPercent                    int
	BudgetPercent, FullCostPercent float64
	// The sweep iterator's own run time: the last sweep's, in all, and
	// its load time (ns since boot).
	IterLastNs, IterTotalNs, IterSince uint64
}

// Status reads the sampler's status.
func (s *Sampler) Status() Status {
	s.mu.RLock()
	st := Status{
		Programs: len(s.progs), LastTick: s.lastTick, LastSweep: s.lastSweep, LastWrite: s.lastWrite,
		LastErr: s.lastErr, Skipped: s.skipped, SkipReason: s.skipReason, LastSweepRead: s.lastRead,
	}
	s.mu.RUnlock()
	st.Sweep, st.SweepDetail, st.IterLastNs, st.IterTotalNs, st.IterSince = s.sweeper.State()
	st.Holders = s.holders.State()
	st.Loaders = "off: the kernel's load records are not followed; runners come from what holds each program"
	if s.cfg.Loaders != nil {
		st.Loaders = s.cfg.Loaders.Status()
	}
	st.DutyPercent = 100
	if s.cfg.Duty != nil {
		st.Duty = s.cfg.Duty.Status()
		st.DutyPercent, st.BudgetPercent, st.FullCostPercent = s.cfg.Duty.Figures()
	}
	return st
}

// WaitTick waits until a tick has swept after t, for at most max. It says
// whether one has.
func (s *Sampler) WaitTick(ctx context.Context, t time.Time, max time.Duration) bool {
	timeout := time.NewTimer(max)
	defer timeout.Stop()
	for {
		s.mu.RLock()
		last, done := s.lastTick, s.tickDone
		s.mu.RUnlock()
		if last.After(t) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-timeout.C:
			return false
		case <-done:
		}
	}
}

// Key is the instance's key in the store.
func (p *Program) Key() store.InstanceKey { return p.key }

// Meta is the program's metadata, with its attach points and owners as
// last read. Read only.
func (p *Program) Meta() *collectors.Meta { return &p.meta }

// Latest is the last sweep's counters and when it read them.
func (p *Program) Latest() (collectors.Sample, time.Time) { return p.cur, p.clock.at }

// Previous is the sweep's before the last, and when it read them; ok is
// false for a program seen by one sweep only.
func (p *Program) Previous() (s collectors.Sample, at time.Time, ok bool) {
	switch p.clock.n {
	case p.first:
		return collectors.Sample{}, time.Time{}, false
	case p.changed:
		return p.prev, p.clock.prevAt, true
	}
	return p.cur, p.clock.prevAt, true
}

// IdentityKey is the program's identity key, "" until it is settled.
func (p *Program) IdentityKey() string { return p.identKey }

// Own reports whether the daemon itself loaded the program. Holding it
// does not count: a process that runs the daemon (a test) may hold
// programs it loaded itself.
func (p *Program) Own() bool { return collectors.LoadedHere(p.meta.ID) }

// Counters are a sweep's cumulative counters as the API counts them.
func Counters(s collectors.Sample) api.Counters {
	return api.Counters{RunTimeNs: s.RunTimeNs, RunCnt: s.RunCnt, RecursionMisses: s.RecursionMisses}
}

// MapUsers indexes the loaded programs by the maps they use, and their
// owners by program id: a map is charged to the owners of the programs
// that use it too.
func (s *Sampler) MapUsers() (users map[uint32][]uint32, owners map[uint32][]collectors.Owner) {
	users, owners = map[uint32][]uint32{}, map[uint32][]collectors.Owner{}
	s.Read(func(v View) {
		for id, p := range v.Programs() {
			for _, m := range p.Meta().MapIDs {
				users[m] = append(users[m], id)
			}
			owners[id] = p.Meta().Owners
		}
	})
	for _, ids := range users {
		slices.Sort(ids)
	}
	return users, owners
}
