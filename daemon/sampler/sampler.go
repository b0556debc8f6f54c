// Package sampler is the daemon's sampling room: each tick it sweeps every
// loaded program (sweep.go: the BPF iterator, else by fd), scales the
// counters under a stats duty cycle (duty.go), reads owners and attach
// points, settles each program's identity, and writes the tick to the
// store (keeping a backlog while the store cannot take it). It is the one
// owner of its lock: the rest of the daemon reads what it holds through
// Read (view.go).
package sampler

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/holders"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// Program is the sampler's view of one loaded program instance: its
// metadata and the last two sweeps, from which the current rates come.
// Other rooms read it through its methods (view.go), inside Read.
type Program struct {
	// The fields each tick reads come first, together; meta, read when
	// something asks, after them.
	key store.InstanceKey
	// cur is the program's counters at the last sweep. A sweep that reads
	// only the programs that changed leaves the rest as they are, so when
	// they were read, and the sweep before, is the sampler's clock: prev
	// is the counters before the sweep that last changed them (changed),
	// and first is the sweep that first saw it.
	cur, prev      collectors.Sample
	changed, first uint64
	clock          *sweepClock
	// stored is the last sample written to the store, kept in place
	// (not behind a pointer: every tick reads it for every program, and a
	// pointer would be one more cache miss each on a host of thousands).
	stored     collectors.Sample
	haveStored bool
	// swept is the sweep (sampler.sweeps) that last read it: after a
	// sweep of every program, one it did not read is gone. storedAt is
	// the sweep that last stored it.
	swept, storedAt uint64
	// firstSeen is when its record was first stored; ownersStored says the
	// record holds its owners (a program seen before the owners scan that
	// finds them is stored again with them, for owners' history).
	firstSeen    time.Time
	ownersStored bool
	// ident is the program's identity (internal/identity), settled once
	// its attach points and owners have been read a tick or more after it
	// appeared; identKey is its key, made once (the detector looks
	// programs up by it every tick), "" until then.
	ident    identity.Identity
	identKey string
	meta     collectors.Meta
	// resumed is the identity a daemon before this one settled this very
	// instance (same boot, id and tag), which it keeps (New).
	resumed string
}

// sweepClock is when the last two sweeps read the programs: every
// program loaded then, changed or not, was read at those times.
type sweepClock struct {
	n          uint64 // the sweep (sampler.sweeps) at
	at, prevAt time.Time
}

// heartbeat is how often an idle program's unchanged counters are stored
// anyway. Skipping idle ticks keeps the per-tick write small on hosts with
// many idle programs; rates stay exact because counters are cumulative.
const heartbeat = time.Minute

// ownersMinGap is the least time between two scans of /proc for owners.
const ownersMinGap = 5 * time.Second

// settleGap is the least time between two scans while a program's
// identity waits for one: it follows the program (regressions, new
// versions) only once settled, so a second of waiting is a second of its
// history the detector does not see. Scans cost about a millisecond per
// thousand fds with the holders iterator.
const settleGap = time.Second

// Config is what the sampler needs of the daemon's configuration.
type Config struct {
	Interval time.Duration
	// OwnersEvery is how often owners and attach points are read again
	// when nothing new appeared.
	OwnersEvery time.Duration
	// BPFFS is where pins are looked for, to charge a program no process
	// holds to its pin.
	BPFFS  string
	Logger *slog.Logger
	// LinksFailReads makes the first N link readings fail (tests).
	LinksFailReads int
	// Loaders hands over the loader of a program whose load the kernel
	// recorded while the daemon ran (daemon/loaders); nil: none known.
	Loaders LoaderSource
	// Pods names containers by their Kubernetes pods (daemon/podnames);
	// nil: by ids only.
	Pods PodSource
	// Containers names containers no pod names, by the name their
	// runtime gave them (internal/podman); nil leaves their ids.
	Containers ContainerNames
	// Duty, at --stats.duty below 100% or under --stats.budget, scales
	// each sweep's counters to the whole interval while stats are on for
	// part of it (duty.go); nil otherwise.
	Duty *DutyCycle
	// Devices adds the programs netlink attaches and places device links
	// in their network namespaces (collectors/netspace); nil: netlink's
	// attachments in the daemon's own namespace only.
	Devices Devices
}

// Devices is what reads programs on network devices, in every network
// namespace: collectors/netspace.
type Devices interface {
	// Attach returns links with device links placed and netlink's
	// attachments merged in; others asks it to look beyond the daemon's
	// namespace even where no link needs it.
	Attach(links map[uint32][]collectors.AttachPoint, others bool) (map[uint32][]collectors.AttachPoint, error)
}

// LoaderSource says who loaded a program, once: daemon/loaders.
type LoaderSource interface {
	Take(id uint32) (collectors.Loader, bool)
	// Status says in words how loads are followed, for status.
	Status() string
}

// PodSource names the pod of a container's cgroup from what it has at
// hand, never waiting for the runtime: the sampler asks under its lock.
// pending says the answer is on its way, which an identity about to
// settle waits for (up to settleWait).
type PodSource interface {
	Lookup(cgroup string) (pod *collectors.Pod, pending bool)
}

// ContainerNames names the containers of a plain runtime (Podman) where
// no pod names them: the name a user gave the container, "" for none.
// It never waits on a daemon.
type ContainerNames interface {
	Name(cgroup string) string
}

// Sampler sweeps all programs each tick, keeps the current view for the
// API and writes each tick to the store in one transaction.
type Sampler struct {
	cfg     Config
	sweeper *Sweeper
	pins    *collectors.PinScanner
	store   *store.DB
	bootID  string
	boot    uint32
	log     *slog.Logger
	selfPID int

	mu        sync.RWMutex
	progs     map[uint32]*Program // loaded now, by kernel id
	lastTick  time.Time
	lastSweep time.Duration
	lastRead  int // programs the last sweep read
	lastWrite time.Duration
	lastErr   error
	ownersAt  time.Time
	// lastTag is each identity's newest tag, for new_version events;
	// legacy are identities of records stored before identities were
	// kept, which a settled program may carry on (identity.Continues).
	lastTag map[string]string
	legacy  []legacyIdentity
	// podRunners are the identities settled with the runner of a pod's
	// container by ids ("container pod UID/ID": before pods had names, or
	// while the CRI socket did not answer), by pod uid: a program of that
	// pod named by its workload carries them on (identity.ContinuesPod).
	podRunners map[string][]identity.Identity
	// resume is the records of this boot's programs still loaded when the
	// last daemon stopped, by instance: their identities carry on.
	resume map[store.InstanceKey]store.Program
	// slots tells apart equal programs loaded at the same time; unsettled
	// counts programs whose identity is not settled yet.
	slots     identity.Slots
	unsettled int
	buf       []collectors.Sample
	ticks     uint64
	// held is progs as a slice, for the heartbeat's scan by id, built
	// again when gen has moved since heldGen.
	held        []heldProgram
	heldGen     uint64
	ownersStale bool // programs appeared since owners were last read
	// viewComplete says the last owners reading read every link and
	// holder: a failed or partial one leaves identities unsettled.
	viewComplete bool
	// skipped programs the last sweep could not read, and why the first.
	skipped    int
	skipReason string
	backlog    backlog // ticks not yet stored
	hooks      Hooks
	// tickDone is closed and replaced after each tick, for WaitTick.
	tickDone chan struct{}
	// leaving are the instances this tick found gone, until the tick is
	// stored: a reader of both memory and store (progs --all) sees them
	// in neither as loaded nor yet with their unloaded event
	// (View.LeavingNow).
	leaving map[store.InstanceKey]bool
	// gen changes whenever a program comes or goes or owners are read
	// again; moved is the last tick's programs whose run count changed.
	// The detector reads both (under mu) to touch only what changed: on
	// a host of idle programs, nothing.
	gen   uint64
	moved []*Program
	// tickRuns is the last tick's runs over the programs that moved (as
	// the rest of the daemon sees them: scaled under a duty cycle), for
	// the stats budget; sweptAt is when its sweep began (the real clock).
	tickRuns uint64
	sweptAt  time.Time
	// carriedRates: stats were off all through the last tick, whose
	// counters moved at the duty cycle's carried rates (DutyCycle.Carried).
	carriedRates bool
	// sweeps counts sweeps, failed ticks too, for program.swept; clock is
	// when the last two read the programs.
	sweeps uint64
	clock  sweepClock
	// known is the walk of the programs held (collectors.Walk): what a
	// changed-only sweep's trailer says when none went away. needAll asks
	// the next sweep for every program: the last one's changes were not
	// all taken in, or some program went away.
	known   collectors.Walk
	needAll bool
	// holders reads owner processes.
	holders *holders.Scanner
}

// Hooks are the calls the sampler makes upward, set by the daemon before
// the first tick.
type Hooks struct {
	// Appeared, if set, is called (under the sampler's lock: it must not
	// call Read) for each program seen for the first time, after its
	// metadata is read.
	Appeared func(id uint32, name string)
	// Ticked, if set, is called after each tick with how long its sweep
	// and its store write took.
	Ticked func(sweep, write time.Duration)
}

// New makes a sampler that sweeps with sw, reads owners with scanner and
// stores into db under this boot. It reads the store's programs to know
// each identity's newest tag.
func New(cfg Config, sw *Sweeper, scanner *holders.Scanner, db *store.DB, bootID string, boot uint32, hooks Hooks) (*Sampler, error) {
	s := &Sampler{
		cfg: cfg, sweeper: sw, pins: collectors.NewPinScanner(cfg.BPFFS), holders: scanner, store: db, bootID: bootID, boot: boot, log: cfg.Logger, selfPID: os.Getpid(),
		progs: map[uint32]*Program{}, lastTag: map[string]string{}, podRunners: map[string][]identity.Identity{}, hooks: hooks, tickDone: make(chan struct{}), needAll: true,
	}
	// Remember the newest tag per identity already in the store, so a
	// reload with new code after a daemon restart still counts as a new
	// version.
	known, err := db.Programs()
	if err != nil {
		return nil, err
	}
	sort.Slice(known, func(i, j int) bool { return known[i].FirstSeen.Before(known[j].FirstSeen) })
	s.resume = map[store.InstanceKey]store.Program{}
	for _, p := range known {
		if p.Identity != "" && p.BootID == bootID && p.Loaded() {
			s.resume[p.Key] = p
		}
		if p.Identity != "" {
			s.lastTag[p.Identity] = p.Tag
			s.notePodRunner(p.Identity)
		} else if id, ok := LegacyIdentityOf(p); ok {
			s.legacy = append(s.legacy, legacyIdentity{id, p.Tag})
		}
	}
	return s, nil
}

// legacyIdentity is the identity of a record stored before identities
// were kept, derived from its metadata, and its tag.
type legacyIdentity struct {
	ident identity.Identity
	tag   string
}

// LegacyIdentityOf derives the identity of a record that has none: its
// name is the kernel's cut name, its attach points and owners what was
// read then. ok is false for a record whose metadata cannot be read.
func LegacyIdentityOf(p store.Program) (identity.Identity, bool) {
	var m collectors.Meta
	if len(p.Meta) == 0 || json.Unmarshal(p.Meta, &m) != nil {
		return identity.Identity{}, false
	}
	m.Name, m.Type = p.Name, p.Type
	// Daemons of then listed themselves among a program's holders when a
	// brief fd of theirs was open during the scan: no runner.
	m.Owners = slices.DeleteFunc(m.Owners, func(o collectors.Owner) bool { return o.Comm == "bpfperfd" })
	return identity.Of(m, 0), true
}

// notePodRunner keeps key in podRunners where its runner is a pod's
// container by ids.
func (s *Sampler) notePodRunner(key string) {
	id, ok := identity.Parse(key)
	if !ok {
		return
	}
	if uid, ok := identity.PodUIDOf(id.Runner); ok && !slices.Contains(s.podRunners[uid], id) {
		s.podRunners[uid] = append(s.podRunners[uid], id)
	}
}

// previousTag is the tag of the last program of identity id before this
// one: the newest stored under its key, else that of an identity of the
// same pod named by ids that id continues, else that of a record stored
// before identities were kept that id continues. pod is the program's.
func (s *Sampler) previousTag(id identity.Identity, pod *collectors.Pod) (string, bool) {
	if tag, ok := s.lastTag[id.Key()]; ok {
		return tag, true
	}
	if pod != nil {
		olds := s.podRunners[pod.UID]
		for i := len(olds) - 1; i >= 0; i-- {
			if identity.ContinuesPod(olds[i], id, pod.UID) {
				return s.lastTag[olds[i].Key()], true
			}
		}
	}
	for i := len(s.legacy) - 1; i >= 0; i-- {
		if identity.Continues(s.legacy[i].ident, id) {
			return s.legacy[i].tag, true
		}
	}
	return "", false
}

// waitingToSettle says whether a program seen in an earlier tick still
// has no identity. Called with s.mu held.
func (s *Sampler) waitingToSettle(now time.Time) bool {
	if s.unsettled == 0 {
		return false
	}
	for _, p := range s.progs {
		if p.identKey == "" && !p.firstSeen.IsZero() && p.firstSeen.Before(now) {
			return true
		}
	}
	return false
}

// settle fixes p's identity from its attach points and owners as last
// read, gives it a slot among equal programs loaded now, and says whether
// it is a new version: the same identity seen before with another tag. Its
// record is stored again, with the identity. Called with s.mu held.
func (s *Sampler) settle(p *Program, now time.Time, t *store.Tick) error {
	s.takeLoader(p)
	s.namePod(p)
	if id, ok := identity.Parse(p.resumed); ok && s.slots.Claim(id) {
		p.ident = id
	} else {
		// The slot whose last version had this code, where there is one:
		// copies that differ in their code keep their histories whatever
		// order they are loaded in again.
		p.ident = s.slots.TakePreferring(identity.Of(p.meta, s.selfPID), func(c identity.Identity) bool {
			return s.lastTag[c.Key()] == p.meta.Tag
		})
	}
	p.identKey = p.ident.Key()
	s.unsettled--
	s.gen++
	if old, ok := s.previousTag(p.ident, p.meta.RunPod()); ok && old != p.meta.Tag {
		t.Events = append(t.Events, store.Event{Time: now, Kind: "new_version", ID: p.meta.ID, Name: p.meta.Name, Tag: p.meta.Tag, Identity: p.identKey, Detail: "previous tag " + old})
	}
	s.lastTag[p.identKey] = p.meta.Tag
	s.notePodRunner(p.identKey)
	rec, err := s.record(p, p.firstSeen)
	if err != nil {
		return err
	}
	t.Loaded = append(t.Loaded, rec)
	return nil
}

// gone drops an unloaded program: settles it first if it went before its
// identity was (its history is its identity's all the same), then frees
// its slot. Called with s.mu held.
func (s *Sampler) gone(p *Program, now time.Time, t *store.Tick) error {
	if p.haveStored && p.unstored() {
		// One of the daemon's own, stored at its heartbeat (mustStore):
		// what it ran since reaches the history with the tick that
		// finds it gone, its last sweep's counters.
		s.storeSample(p, t)
	}
	if p.identKey == "" && !p.firstSeen.IsZero() {
		if err := s.settle(p, now, t); err != nil {
			return err
		}
	}
	t.Unloaded = append(t.Unloaded, p.key)
	t.Events = append(t.Events, store.Event{Time: now, Kind: "unloaded", ID: p.meta.ID, Name: p.meta.Name, Tag: p.meta.Tag, Identity: p.identKey})
	if p.identKey != "" {
		s.slots.Free(p.ident)
	} else {
		s.unsettled--
	}
	delete(s.progs, p.meta.ID)
	s.markLeaving(p.key)
	s.known.Remove(p.key.ID, p.cur.LoadTime)
	if s.cfg.Duty != nil {
		s.cfg.Duty.forget(p.key.ID)
	}
	s.gen++
	return nil
}

// markLeaving notes that the tick being made let go of key (leaving).
// Called with s.mu held.
func (s *Sampler) markLeaving(key store.InstanceKey) {
	if s.leaving == nil {
		s.leaving = map[store.InstanceKey]bool{}
	}
	s.leaving[key] = true
}

// tickStored ends what waits for the tick's write: its leaving instances
// are in the store now (or the tick in the backlog), and WaitTick's
// waiters are woken. Called with s.mu held.
func (s *Sampler) tickStored() {
	clear(s.leaving)
	close(s.tickDone)
	s.tickDone = make(chan struct{})
}

// loadedBefore returns instances the store thinks are loaded. Those of
// another boot are gone for sure; those of this boot are checked by the
// first tick.
func (s *Sampler) staleInstances(loaded map[uint32]bool) ([]store.InstanceKey, error) {
	known, err := s.store.Programs()
	if err != nil {
		return nil, err
	}
	var gone []store.InstanceKey
	for _, p := range known {
		if p.Loaded() && (p.Key.Boot != s.boot || !loaded[p.ID]) {
			gone = append(gone, p.Key)
		}
	}
	return gone, nil
}

// Tick runs one sweep and stores it; first is the daemon's first tick,
// which also marks unloaded what the store thinks is loaded but is not.
func (s *Sampler) Tick(now time.Time, first bool) error {
	samples, all, sweep, err := s.sweep(now)
	if err != nil {
		return err
	}

	t := store.Tick{Time: now}
	s.mu.Lock()
	prevTick := s.lastTick
	s.lastRead = len(samples)
	s.carriedRates = s.cfg.Duty != nil && s.cfg.Duty.Carried()
	err = s.update(samples, all, now, &t)
	runs := s.tickRuns
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if d := s.cfg.Duty; d != nil {
		// The budget sets the coming interval's share from this one's
		// runs (the programs that moved: no walk over every program),
		// then stats go off until that share's on part, before the tick's
		// own work (the store write), which would otherwise run in it.
		if wall := now.Sub(prevTick); !prevTick.IsZero() && wall > 0 {
			d.observe(s.latest, float64(runs)/wall.Seconds())
		}
		d.afterTick(s.sweptAt)
		for _, e := range d.Transitions() {
			e.Time = now
			t.Events = append(t.Events, e)
		}
	}
	if first {
		seen := make(map[uint32]bool, len(samples))
		for _, smp := range samples {
			seen[smp.ID] = true
		}
		stale, err := s.staleInstances(seen)
		if err != nil {
			return err
		}
		t.Unloaded = append(t.Unloaded, stale...)
	}
	return s.write(t, now, sweep)
}

// sweep reads the programs' counters, scaled under a duty cycle, and says
// how long the reading took. all says the samples are every program
// loaded; otherwise they are those that changed since the last sweep and
// the walk proved that none of the rest went away. A sweep that skipped
// programs the kernel refused to open is good for the rest, and says so
// when their number changes, not every tick.
func (s *Sampler) sweep(now time.Time) (samples []collectors.Sample, all bool, took time.Duration, err error) {
	start := time.Now()
	samples, all, err = s.sweepChanged(now)
	took = time.Since(start)
	s.sweptAt = start
	if s.cfg.Duty != nil {
		samples = s.cfg.Duty.scale(samples, start, all)
	}
	s.buf = samples
	var skipped *collectors.SkippedError
	switch {
	case errors.As(err, &skipped):
		if skipped.Skipped != s.skipped {
			s.log.Warn("sweep skipped programs the kernel refused to open", "skipped", skipped.Skipped, "first", skipped.First)
		}
	case err != nil:
		return nil, false, took, fmt.Errorf("sweep: %w", err)
	}
	s.mu.Lock()
	s.skipped, s.skipReason = 0, ""
	if skipped != nil {
		s.skipped, s.skipReason = skipped.Skipped, skipped.First.Error()
	}
	s.mu.Unlock()
	return samples, all, took, nil
}

// sweepChanged reads only the programs that changed where it can: when
// the walk's trailer says some program the sampler holds went away, it
// reads them all again to find which. Until the tick has taken the
// samples in (update), the next sweep is asked for every program.
func (s *Sampler) sweepChanged(now time.Time) ([]collectors.Sample, bool, error) {
	all := s.needAll
	s.needAll = true
	samples, walk, err := s.sweeper.sweep(s.buf[:0], now, all)
	if err != nil || walk == nil || all {
		return samples, true, err
	}
	s.mu.RLock()
	same := s.walkAfter(samples) == *walk
	s.mu.RUnlock()
	if same {
		return samples, false, nil
	}
	samples, _, err = s.sweeper.sweep(samples[:0], now, true)
	return samples, true, err
}

// walkAfter is the walk of the programs held once samples, a changed-only
// sweep's, are taken in, if none went away: those new to the sampler
// added, those loaded again under their id counted with their new load
// time. Called with s.mu held.
func (s *Sampler) walkAfter(samples []collectors.Sample) collectors.Walk {
	w := s.known
	for _, smp := range samples {
		p := s.progs[smp.ID]
		if p != nil && p.cur.LoadTime == smp.LoadTime {
			continue
		}
		if p != nil {
			w.Remove(smp.ID, p.cur.LoadTime)
		}
		w.Add(smp.ID, smp.LoadTime)
	}
	return w
}

// latest is every held program's counters as of the last sweep, for the
// stats budget when it starts scaling. Called without s.mu.
func (s *Sampler) latest() []collectors.Sample {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]collectors.Sample, 0, len(s.progs))
	for _, p := range s.progs {
		out = append(out, p.cur)
	}
	return out
}

// update takes a sweep into the programs held: new ones are read and
// recorded, gone ones dropped, owners read when due, identities settled;
// what the store must keep goes into t. Called with s.mu held.
func (s *Sampler) update(samples []collectors.Sample, all bool, now time.Time, t *store.Tick) error {
	fresh, err := s.merge(samples, all, now, t)
	if err != nil {
		return err
	}
	s.storeHeartbeats(t)
	// Map order is random: sort so events and records come out by id.
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].meta.ID < fresh[j].meta.ID })
	sort.Slice(t.Events, func(i, j int) bool { return t.Events[i].ID < t.Events[j].ID })
	// New programs want their owners soon, but a burst of loads (an agent
	// starting) should not rescan /proc every tick: at most every few
	// seconds, and at the slow cadence otherwise. Programs whose identity
	// is not settled keep asking.
	s.ownersStale = s.ownersStale || len(fresh) > 0
	if (s.ownersStale && now.Sub(s.ownersAt) >= ownersMinGap) || now.Sub(s.ownersAt) >= s.cfg.OwnersEvery ||
		(s.waitingToSettle(now) && now.Sub(s.ownersAt) >= settleGap) {
		s.ownersStale = false
		s.refreshOwners(now)
		if err := s.settleAll(now, t); err != nil {
			return err
		}
	}
	for _, p := range fresh {
		rec, err := s.record(p, now)
		if err != nil {
			return err
		}
		t.Loaded = append(t.Loaded, rec)
		t.Events = append(t.Events, store.Event{Time: now, Kind: "loaded", ID: p.meta.ID, Name: p.meta.Name, Tag: p.meta.Tag})
	}
	s.ticks++
	s.needAll = false
	return nil
}

// merge takes each sample into its program, reading the metadata of
// programs not seen before (which it returns). After a sweep of all
// programs it drops those the sweep did not see; after a changed-only
// sweep none went away (sweepChanged proved it). Called with s.mu held.
func (s *Sampler) merge(samples []collectors.Sample, all bool, now time.Time, t *store.Tick) (fresh []*Program, err error) {
	s.moved = s.moved[:0]
	s.tickRuns = 0
	s.sweeps++
	s.clock = sweepClock{n: s.sweeps, at: now, prevAt: s.clock.at}
	swept := 0 // programs in s.progs this sweep saw
	for _, smp := range samples {
		p := s.progs[smp.ID]
		if p != nil && (p.cur.Tag != smp.Tag || p.cur.Name != smp.Name) {
			// The id was reused by another program: the old one is gone.
			if err := s.gone(p, now, t); err != nil {
				return nil, err
			}
			p = nil
		}
		if p == nil {
			if p, err = s.appeared(smp); err != nil {
				return nil, err
			}
			if p == nil {
				continue // unloaded between the sweep and now
			}
			fresh = append(fresh, p)
		} else if smp != p.cur {
			s.take(p, smp)
		}
		p.swept = s.sweeps
		swept++
		if s.mustStore(p) {
			s.storeSample(p, t)
		}
	}
	if !all {
		return fresh, nil
	}
	// Every program this sweep saw is in s.progs and marked swept: when
	// they are all there is, none is gone, and the walk over every program
	// (a cache miss each, 10,000 of them on a big host) is skipped.
	for _, p := range s.progs {
		if swept == len(s.progs) {
			break
		}
		if p.swept != s.sweeps {
			if err := s.gone(p, now, t); err != nil {
				return nil, err
			}
		}
	}
	return fresh, nil
}

// appeared holds the program of a sample not seen before, its metadata
// read; nil if it was unloaded since the sweep. Called with s.mu held.
func (s *Sampler) appeared(smp collectors.Sample) (*Program, error) {
	meta, err := collectors.ReadMeta(smp.ID)
	if errors.Is(err, collectors.ErrGone) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read metadata of program %d: %w", smp.ID, err)
	}
	p := &Program{key: store.InstanceKey{Boot: s.boot, ID: smp.ID}, meta: meta, cur: smp, changed: s.sweeps, first: s.sweeps, clock: &s.clock}
	s.takeLoader(p)
	s.resumeFromStore(p)
	s.progs[smp.ID] = p
	s.known.Add(smp.ID, smp.LoadTime)
	s.unsettled++
	s.gen++
	if s.hooks.Appeared != nil {
		s.hooks.Appeared(smp.ID, meta.Name)
	}
	return p, nil
}

// takeLoader gives p its loader where the kernel's load record named it:
// when p appears, else when it settles (the record may come a moment
// after the sweep that found p). Called with s.mu held.
func (s *Sampler) takeLoader(p *Program) {
	if p.meta.Loader != nil || s.cfg.Loaders == nil {
		return
	}
	if lo, ok := s.cfg.Loaders.Take(p.meta.ID); ok {
		p.meta.Loader = &lo
	}
}

// namePod names the pod of p's loader's container, where its load record
// named a container and the pod was not known then; pending says the
// answer is on its way. Called with s.mu held.
func (s *Sampler) namePod(p *Program) (pending bool) {
	lo := p.meta.Loader
	if lo == nil || lo.Pod != nil || lo.Container == "" || lo.Cgroup == "" {
		return false
	}
	var pod *collectors.Pod
	if s.cfg.Pods != nil {
		pod, pending = s.cfg.Pods.Lookup(lo.Cgroup)
	}
	if pod != nil {
		named := *lo // the loader may be shared with a stored record's
		named.Pod = pod
		p.meta.Loader = &named
	} else if name := s.containerName(lo.Container, lo.Cgroup); name != lo.Container {
		named := *lo
		named.Container = name
		p.meta.Loader = &named
	}
	return pending
}

// containerName is container (a cgroup's container as
// collectors.UnitAndContainer reads it: its short id) by the name its
// runtime gave it, where Containers has one. A pod's container keeps its
// ids: pods are named by the CRI.
func (s *Sampler) containerName(container, cgroup string) string {
	if s.cfg.Containers == nil || strings.HasPrefix(container, "pod ") {
		return container
	}
	if name := s.cfg.Containers.Name(cgroup); name != "" {
		return name
	}
	return container
}

// resumeFromStore carries on, for a program the last daemon already
// settled (same instance, same tag), its identity and its loader: a
// restart changes neither, even where the loader has exited since and no
// record of its load is left. Called with s.mu held.
func (s *Sampler) resumeFromStore(p *Program) {
	rec, ok := s.resume[p.key]
	if !ok || rec.Tag != p.meta.Tag {
		return
	}
	delete(s.resume, p.key)
	p.resumed = rec.Identity
	if p.meta.Loader == nil {
		var m collectors.Meta
		if json.Unmarshal(rec.Meta, &m) == nil {
			p.meta.Loader = m.Loader
		}
	}
}

// take sets p's counters from a sweep that found them changed. Called
// with s.mu held.
func (s *Sampler) take(p *Program, smp collectors.Sample) {
	if smp.LoadTime != p.cur.LoadTime {
		s.known.Remove(p.key.ID, p.cur.LoadTime)
		s.known.Add(p.key.ID, smp.LoadTime)
	}
	if smp.RunCnt != p.cur.RunCnt {
		s.moved = append(s.moved, p)
		if smp.RunCnt > p.cur.RunCnt {
			s.tickRuns += smp.RunCnt - p.cur.RunCnt
		}
	}
	p.prev, p.cur, p.changed = p.cur, smp, s.sweeps
}

// storeSample puts p's counters in the tick. Called with s.mu held.
func (s *Sampler) storeSample(p *Program, t *store.Tick) {
	p.stored, p.haveStored, p.storedAt = p.cur, true, s.sweeps
	t.Samples = append(t.Samples, store.Sample{Key: p.key, Values: [3]uint64{p.cur.RunTimeNs, p.cur.RunCnt, p.cur.RecursionMisses}, Carried: s.carriedRates})
}

// storeHeartbeats stores, on the few ticks of each heartbeat period that
// have any, the idle programs whose heartbeat it is: a changed-only sweep
// did not read them, so they are looked for here, on those ticks alone.
// Called with s.mu held.
//
// It asks each program's id before the program itself: the ids are one
// dense slice, the programs are scattered over the heap, and reading one
// is a cache miss. At 10,000 idle programs the loop over every program
// on each heartbeat tick was an eighth of the daemon's CPU, nearly all of
// it the load of storedAt; now the programs read are only those whose
// heartbeat it is.
func (s *Sampler) storeHeartbeats(t *store.Tick) {
	every := uint64(heartbeat / s.cfg.Interval)
	if !store.HeartbeatTick(s.ticks, every) {
		return
	}
	if s.heldGen != s.gen || len(s.held) != len(s.progs) {
		// The old entries are cleared, not left past the new length: they
		// would keep programs that went away, after a burst thousands of
		// them, alive for the daemon's life.
		if cap(s.held) > 2*len(s.progs) {
			s.held = nil
		}
		clear(s.held[:cap(s.held)])
		s.held = s.held[:0]
		for id, p := range s.progs {
			s.held = append(s.held, heldProgram{id, p})
		}
		s.heldGen = s.gen
	}
	for _, h := range s.held {
		if store.IdleHeartbeat(s.ticks, h.id, every) && h.p.storedAt != s.sweeps {
			s.storeSample(h.p, t)
		}
	}
}

// heldProgram is one entry of Sampler.held.
type heldProgram struct {
	id uint32
	p  *Program
}

// settleWait bounds how long an identity waits for a complete view of its
// program: owners and links read without a failure, and an attach point
// where it has neither one nor a run yet.
const settleWait = 10 * time.Second

// readyToSettle says whether p's identity may be fixed from what was just
// read. A program that was neither attached nor run yet waits: a loader
// often attaches what it loaded a few seconds later, and the attach point
// is part of the identity. So does every program while the last reading
// failed in part (a link being set up answers EAGAIN): an identity fixed
// from it would lack what it missed. So does a program whose loader's pod,
// or the pod of its device's network namespace, the CRI is being asked
// for (it takes the loader and the pod's name where they have come). Past
// settleWait it settles from what is known. An instance the last daemon
// settled keeps its identity. Called with s.mu held.
func (s *Sampler) readyToSettle(p *Program, now time.Time) bool {
	s.takeLoader(p)
	podPending := s.namePod(p) || s.holderPodPending(p) || devicePodPending(p)
	switch {
	case p.resumed != "" || now.Sub(p.firstSeen) >= settleWait:
		return true
	case !s.viewComplete || podPending:
		// The pod's name is part of the runner: one settled without it
		// would be another identity than the next version's.
		return false
	}
	return len(p.meta.Attach) > 0 || p.cur.RunCnt > 0
}

// settleAll settles, after an owners reading, every program seen in an
// earlier tick: it has had that long to be attached. Those that appeared
// this tick (firstSeen not set yet) wait for the next reading. A program
// whose record was stored before its owners were known is stored again
// with them. Called with s.mu held.
func (s *Sampler) settleAll(now time.Time, t *store.Tick) error {
	var settling []*Program
	for _, p := range s.progs {
		if p.identKey == "" && !p.firstSeen.IsZero() && p.firstSeen.Before(now) && s.readyToSettle(p, now) {
			settling = append(settling, p)
		} else if !p.firstSeen.IsZero() && !p.ownersStored && len(p.meta.Owners) > 0 {
			rec, err := s.record(p, p.firstSeen)
			if err != nil {
				return err
			}
			t.Loaded = append(t.Loaded, rec)
		}
	}
	// By id, so that of two equal programs the older takes slot 0.
	sort.Slice(settling, func(i, j int) bool { return settling[i].meta.ID < settling[j].meta.ID })
	for _, p := range settling {
		if err := s.settle(p, now, t); err != nil {
			return err
		}
	}
	return nil
}

// write stores the tick, after any the store could not take before, and
// keeps it back when the store fails (a full disk), saying so once when
// that starts and once when it ends.
func (s *Sampler) write(t store.Tick, now time.Time, sweep time.Duration) error {
	wstart := time.Now()
	delayed := 0
	var err error
	if s.store.Damaged() != "" {
		// Writes are stopped for good (running_damage.go in store): keep
		// nothing back for a store that will not take it.
		s.backlog = backlog{}
		err = s.store.WriteTick(t)
	} else {
		s.backlog.push(t)
		delayed = len(s.backlog.ticks) - 1
		_, err = s.backlog.flush(s.store.WriteTick)
	}
	switch {
	case errors.Is(err, store.ErrWritesStopped):
		// The store said so once, when it found the damage.
	case err != nil && s.lastErr == nil:
		s.log.Error("store write failed; keeping the newest samples in memory until it works again", "err", err)
	case err == nil && s.lastErr != nil:
		s.log.Info("store writable again", "delayed_ticks_written", delayed, "samples_dropped", s.backlog.dropped)
		s.backlog.dropped = 0
	}
	s.mu.Lock()
	s.lastTick, s.lastSweep, s.lastWrite, s.lastErr = now, sweep, time.Since(wstart), err
	write := s.lastWrite
	s.tickStored()
	s.mu.Unlock()
	if s.hooks.Ticked != nil {
		s.hooks.Ticked(sweep, write)
	}
	return err
}

// mustStore says whether this tick's sample of p goes to the store: the
// first one, and any change of a program not the daemon's own. Idle
// programs, and the daemon's own, are stored at their heartbeat
// (storeHeartbeats), and a program's last counters when it goes (gone).
func (s *Sampler) mustStore(p *Program) bool {
	if !p.haveStored {
		return true
	}
	// The daemon's own programs run every tick on a host where nothing
	// else does: the sweep's iterator at each sweep, the load records'
	// tracepoints at the daemon's own bpf(2) calls, the profile filter at
	// every sample. Storing each of their runs made every tick write and
	// commit (an fdatasync, which also sets Go's monitor thread polling
	// again): 23% of the daemon's CPU over 1,000 idle programs
	// (docs/performance.md). Their cumulative counters keep their rates
	// exact between heartbeats, and status shows their latest cost.
	return p.unstored() && !p.Own()
}

// unstored says whether p's counters moved since they were last stored.
func (p *Program) unstored() bool {
	c, old := &p.cur, &p.stored
	return c.RunCnt != old.RunCnt || c.RunTimeNs != old.RunTimeNs || c.RecursionMisses != old.RecursionMisses
}

// refreshOwners reads attach points and owner processes for every loaded
// program. Called with s.mu held. Failures only cost detail, so they are
// logged, not returned.
func (s *Sampler) refreshOwners(now time.Time) {
	s.ownersAt = now
	s.gen++ // owners decide which programs are the daemon's own
	links, err := collectors.Links()
	if s.cfg.LinksFailReads > 0 {
		s.cfg.LinksFailReads--
		links, err = map[uint32][]collectors.AttachPoint{}, errors.New("links read failed (--debug.links-fail-reads)")
	}
	s.viewComplete = err == nil
	if err != nil {
		// A link not read this time (one being set up): read again at
		// the next gap, not only when programs come or OwnersEvery.
		s.ownersStale = true
		s.log.Warn("read bpf links", "err", err)
	}
	// Programs attached without a link: through netlink (tc filters, XDP),
	// as bpftool net lists them, and with Devices in every network
	// namespace, device links named in theirs; the other namespaces
	// are entered only while a network program is loaded.
	if s.cfg.Devices != nil {
		var err error
		if links, err = s.cfg.Devices.Attach(links, s.netProgsLoaded()); err != nil {
			s.log.Warn("read device attachments", "err", err)
		}
	} else if net, err := collectors.NetAttach(); err != nil {
		s.log.Warn("read netlink attachments", "err", err)
	} else {
		links = collectors.MergeAttach(links, net)
	}
	held, err := s.holders.Scan()
	owners := held.Progs
	s.viewComplete = s.viewComplete && err == nil
	if err != nil {
		s.log.Warn("read program owners", "err", err)
	}
	// And programs set on a perf event with an ioctl (bpftrace), which
	// only their holders' perf event fds tell: asked of the holders of
	// programs no link or netlink attachment explains, as bpftool perf
	// does. A perf_event link says nothing of its event before Linux 6.6
	// (its target ""): its holder's perf event fd does.
	var pids []int
	for id := range s.progs {
		if slices.ContainsFunc(links[id], func(a collectors.AttachPoint) bool { return a.Type != "perf_event" || a.Target != "" }) {
			continue
		}
		for _, o := range owners[id] {
			if o.PID != 0 && o.PID != s.selfPID && !slices.Contains(pids, o.PID) {
				pids = append(pids, o.PID)
			}
		}
	}
	if len(pids) > 0 {
		if perf, err := collectors.PerfEventAttach(pids); err != nil {
			s.log.Warn("read perf event attachments", "err", err)
		} else {
			links = collectors.MergeAttach(links, collectors.NamePerfLinks(links, perf))
		}
	}
	// Pins, for every program: a pin outranks a passing holder as runner
	// (identity.RunnerOf), and a program no process holds is charged to it.
	pins := s.pins.Scan()
	for id, p := range s.progs {
		p.meta.Attach = links[id]
		p.meta.Owners = s.namePods(owners[id])
		p.meta.Pin = pins.Progs[id]
		if len(p.meta.Owners) == 0 && p.meta.Pin != "" {
			p.meta.Owners = []collectors.Owner{{Pin: p.meta.Pin}}
		}
	}
}

// netProgsLoaded says whether a program of a type that attaches to
// network devices is loaded (netkit's are sched_cls). Called with s.mu
// held.
func (s *Sampler) netProgsLoaded() bool {
	for _, p := range s.progs {
		switch p.meta.Type {
		case "sched_cls", "sched_act", "xdp":
			return true
		}
	}
	return false
}

// devicePodPending says whether p is on a device of a pod's network
// namespace whose pod the CRI is being asked for: the pod's workload
// names the device in the identity.
func devicePodPending(p *Program) bool {
	return slices.ContainsFunc(p.meta.Attach, func(ap collectors.AttachPoint) bool { return ap.NetnsPending })
}

// holderPodPending says whether the pod of the holder that would be p's
// runner, where no loader is known, is being asked for: the next owners
// reading names it. Called with s.mu held.
func (s *Sampler) holderPodPending(p *Program) bool {
	if p.meta.Loader != nil || s.cfg.Pods == nil {
		return false
	}
	for _, o := range p.meta.Owners {
		if o.PID != 0 && o.PID != s.selfPID && o.Container != "" && o.Pod == nil && o.Cgroup != "" {
			_, pending := s.cfg.Pods.Lookup(o.Cgroup)
			return pending
		}
	}
	return false
}

// namePods names the pods of owners in containers, from what is known
// now (the pods of holders asked for the first time are named at the
// next reading). Called with s.mu held.
func (s *Sampler) namePods(owners []collectors.Owner) []collectors.Owner {
	for i := range owners {
		o := &owners[i]
		if o.Container == "" || o.Cgroup == "" {
			continue
		}
		if s.cfg.Pods != nil {
			o.Pod, _ = s.cfg.Pods.Lookup(o.Cgroup)
		}
		if o.Pod == nil {
			o.Container = s.containerName(o.Container, o.Cgroup)
		}
	}
	return owners
}

// record is p as the store records it, first seen now, which it keeps as
// the program's first sighting.
func (s *Sampler) record(p *Program, now time.Time) (store.Program, error) {
	rec, err := s.makeRecord(p, now)
	if err == nil {
		p.firstSeen, p.ownersStored = now, len(p.meta.Owners) > 0
	}
	return rec, err
}

// makeRecord is p as the store records it, first seen at firstSeen. It
// changes nothing, so readers may call it under the read lock.
func (s *Sampler) makeRecord(p *Program, firstSeen time.Time) (store.Program, error) {
	meta, err := json.Marshal(p.meta)
	if err != nil {
		return store.Program{}, err
	}
	return store.Program{
		Key: p.key, BootID: s.bootID, ID: p.meta.ID, Name: p.meta.Name, KernelName: p.meta.KernelName, Type: p.meta.Type,
		Tag: p.meta.Tag, Identity: p.identKey, FirstSeen: firstSeen, Meta: meta,
	}, nil
}

// StoreFailing reports whether the last tick could not be stored (its error
// is logged once, when that starts).
func (s *Sampler) StoreFailing() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.backlog.ticks) > 0
}
