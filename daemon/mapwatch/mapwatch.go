// Package mapwatch is the daemon's map room: it reads every BPF map every
// --maps.every (memory, entries, holders), stores the readings, and raises
// fill and leak events. It holds no map fd between readings
// (collectors.ReadMaps closes each as it goes); the iterator that counts
// entries is its own program.
package mapwatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/holders"
	"github.com/bpfperf/bpfperf/internal/cadence"
	"github.com/bpfperf/bpfperf/store"
)

// Defaults of the map flags.
const (
	DefaultEvery      = time.Minute
	DefaultLeakWindow = 30 * time.Minute
	MinEvery          = 100 * time.Millisecond
	MaxEvery          = time.Hour
)

// The fill thresholds that raise an event when a map crosses them upward,
// in percent of max entries, and how far below one a map must fall before
// crossing it again raises another.
var fillThresholds = []int64{80, 95}

const fillRearm = 5

// Event kinds of maps.
const (
	EventFill = "map_fill"
	EventLeak = "map_leak"
)

// watchedMap is the watcher's view of one map: its last reading, who
// holds it, and the state behind its events.
type watchedMap struct {
	key    store.InstanceKey
	info   collectors.MapInfo
	at     time.Time
	owners []collectors.Owner // processes holding a fd of the map itself
	pin    string             // its first pin path under --bpffs, if pinned
	// band is the highest threshold crossed and not re-armed (0: none).
	band int64
	// trail is the entries of the readings over the leak window, oldest
	// first; leaking is set once a leak event fired, until entries fall.
	trail   []trailPoint
	leaking bool
}

type trailPoint struct {
	at      time.Time
	entries int64
}

// Config is how the watcher reads.
type Config struct {
	Every      time.Duration // --maps.every
	LeakWindow time.Duration // steady growth this long is a leak
	WalkBudget int           // keys one reading may walk (0: collectors' default)
	BPFFS      string        // where pins are looked for
	Logger     *slog.Logger
}

// Validate checks the map flags and fills their defaults.
func (c *Config) Validate() error {
	if c.Every == 0 {
		c.Every = DefaultEvery
	}
	if c.LeakWindow == 0 {
		c.LeakWindow = DefaultLeakWindow
	}
	if c.Every < MinEvery || c.Every > MaxEvery {
		return fmt.Errorf("%w: --maps.every %v is outside %v..%v", errs.BadConfig, c.Every, MinEvery, MaxEvery)
	}
	if c.LeakWindow < 2*c.Every {
		return fmt.Errorf("%w: --maps.leak-window %v must be at least two readings (2 x --maps.every %v)", errs.BadConfig, c.LeakWindow, c.Every)
	}
	if c.WalkBudget < 0 {
		return fmt.Errorf("%w: --maps.walk-budget %d is negative", errs.BadConfig, c.WalkBudget)
	}
	return nil
}

// Users indexes the loaded programs by the maps they use, and their
// owners by program id: a map is charged to the owners of the programs
// that use it too.
type Users func() (byMap map[uint32][]uint32, owners map[uint32][]collectors.Owner)

// Watcher reads every map every Config.Every: memory, entries, holders;
// stores the readings and raises fill and leak events.
type Watcher struct {
	cfg    Config
	store  *store.DB
	boot   uint32
	bootID string
	log    *slog.Logger
	iter   *collectors.MapIter
	// counting says how entries are counted on this host, in words.
	counting string
	// users gives the owners a map is recorded with through its programs.
	users Users
	// holders reads who holds each map.
	holders *holders.Scanner
	pins    *collectors.PinScanner

	mu       sync.RWMutex
	maps     map[uint32]*watchedMap
	last     time.Time
	cost     collectors.MapsCost
	ownersNs time.Duration
	lastErr  error
	readings uint64
}

// New makes a watcher that reads holders with scanner and stores into db
// under this boot.
func New(cfg Config, scanner *holders.Scanner, db *store.DB, bootID string, boot uint32, users Users) *Watcher {
	w := &Watcher{cfg: cfg, holders: scanner, store: db, boot: boot, bootID: bootID, log: cfg.Logger, users: users, maps: map[uint32]*watchedMap{}, pins: collectors.NewPinScanner(cfg.BPFFS)}
	it, err := collectors.NewMapIter()
	if err != nil {
		w.counting = "walk: hash maps' keys walked with get-next-key, the kernel's count is unavailable (" + err.Error() + ")"
		w.log.Warn("map entries counted by walking keys", "why", err)
	} else {
		w.iter = it
		w.counting = "kernel: bpf_map_sum_elem_count for the hash family in one iterator pass (iter/bpf_map); LPM tries walked with get-next-key"
	}
	return w
}

// Close drops the entries iterator.
func (w *Watcher) Close() {
	if w.iter != nil {
		w.iter.Close()
	}
}

// Run reads the maps now and every Config.Every until ctx is done.
func (w *Watcher) Run(ctx context.Context, now func() time.Time) {
	t := cadence.NewTicker(w.cfg.Every) // waking with the daemon's ticks
	defer t.Stop()
	for {
		if err := w.read(now()); err != nil {
			w.log.Warn("read maps", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read takes one reading of every map and stores it with its events.
func (w *Watcher) read(now time.Time) error {
	var counts map[uint32]int64
	var countTook time.Duration
	if w.iter != nil {
		start := time.Now()
		var err error
		if counts, err = w.iter.Counts(); err != nil {
			w.log.Warn("map iterator failed; walking keys this reading", "err", err)
			counts = nil
		}
		countTook = time.Since(start)
	}
	infos, cost, err := collectors.ReadMaps(collectors.MapsOptions{Counts: counts, WalkBudget: w.cfg.WalkBudget})
	cost.Counts = countTook
	if err != nil {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		return err
	}
	ostart := time.Now()
	held, herr := w.holders.Scan()
	if herr != nil {
		w.log.Warn("read map holders", "err", herr)
	}
	pins := w.pins.Scan()
	ownersTook := time.Since(ostart)

	var users map[uint32][]uint32
	var progOwners map[uint32][]collectors.Owner
	if w.users != nil {
		users, progOwners = w.users()
	}
	tick := store.MapTick{Time: now}
	w.mu.Lock()
	seen := make(map[uint32]bool, len(infos))
	for _, info := range infos {
		seen[info.ID] = true
		m := w.maps[info.ID]
		if m != nil && (m.info.Name != info.Name || m.info.TypeID != info.TypeID) {
			tick.Gone = append(tick.Gone, m.key) // id reused
			m = nil
		}
		if m == nil {
			m = &watchedMap{key: store.InstanceKey{Boot: w.boot, ID: info.ID}}
			w.maps[info.ID] = m
			owners, _ := json.Marshal(Owners(held.Maps[info.ID], users[info.ID], progOwners, pins.Maps[info.ID]))
			tick.Seen = append(tick.Seen, store.MapRecord{
				Key: m.key, BootID: w.bootID, ID: info.ID, Name: info.Name, Type: info.Type,
				KeySize: info.KeySize, ValueSize: info.ValueSize, MaxEntries: info.MaxEntries, FirstSeen: now, Owners: owners,
			})
		}
		m.info, m.at, m.owners, m.pin = info, now, held.Maps[info.ID], pins.Maps[info.ID]
		tick.Samples = append(tick.Samples, store.MapSample{Key: m.key, Memlock: info.Memlock, Entries: info.Entries})
		tick.Events = append(tick.Events, m.events(now, w.cfg.LeakWindow)...)
	}
	for id, m := range w.maps {
		if !seen[id] {
			tick.Gone = append(tick.Gone, m.key)
			delete(w.maps, id)
		}
	}
	w.last, w.cost, w.ownersNs, w.lastErr = now, cost, ownersTook, nil
	w.readings++
	w.mu.Unlock()
	sort.Slice(tick.Events, func(i, j int) bool { return tick.Events[i].MapID < tick.Events[j].MapID })
	if err := w.store.WriteMaps(tick); err != nil {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		return err
	}
	return nil
}

// events updates the map's fill band and leak trail with its latest
// reading and returns the events that raises. Maps whose entries are not
// counted (arrays, rings, ...: full is normal there) raise none.
func (m *watchedMap) events(now time.Time, window time.Duration) []store.Event {
	n, max := m.info.Entries, int64(m.info.MaxEntries)
	if n < 0 || max == 0 || m.info.Partial {
		return nil
	}
	var out []store.Event
	// Re-arm thresholds the map fell well below, then raise those it
	// crossed upward.
	for i := len(fillThresholds) - 1; i >= 0; i-- {
		if th := fillThresholds[i]; m.band == th && n*100 < (th-fillRearm)*max {
			m.band = 0
			if i > 0 {
				m.band = fillThresholds[i-1]
			}
		}
	}
	for _, th := range fillThresholds {
		if n*100 >= th*max && m.band < th {
			m.band = th
			out = append(out, m.event(now, EventFill, fmt.Sprintf("map %q (id %d, %s) crossed %d%% of max entries: %d of %d", m.info.Name, m.info.ID, m.info.Type, th, n, max)))
		}
	}
	// The leak trail: readings over the window, plus the one just before
	// it, so a full window is covered.
	m.trail = append(m.trail, trailPoint{now, n})
	for len(m.trail) > 2 && !m.trail[1].at.After(now.Add(-window)) {
		m.trail = m.trail[1:]
	}
	if len(m.trail) >= 2 && n < m.trail[len(m.trail)-2].entries {
		m.leaking = false
	}
	if !m.leaking && growsSteadily(m.trail, now, window) {
		m.leaking = true
		first := m.trail[0]
		out = append(out, m.event(now, EventLeak, fmt.Sprintf("map %q (id %d, %s) grew at every reading for %s: %d -> %d of %d entries",
			m.info.Name, m.info.ID, m.info.Type, now.Sub(first.at).Round(time.Second), first.entries, n, max)))
	}
	return out
}

// growsSteadily says whether a trail covers the window and grew at least
// three readings out of four, never shrinking: a map that only filled
// once and then held still is not leaking.
func growsSteadily(trail []trailPoint, now time.Time, window time.Duration) bool {
	if len(trail) < 3 || trail[0].at.After(now.Add(-window)) {
		return false
	}
	ups := 0
	for i := 1; i < len(trail); i++ {
		switch d := trail[i].entries - trail[i-1].entries; {
		case d < 0:
			return false
		case d > 0:
			ups++
		}
	}
	return ups*4 >= (len(trail)-1)*3
}

func (m *watchedMap) event(now time.Time, kind, detail string) store.Event {
	return store.Event{Time: now, Kind: kind, MapID: m.info.ID, Name: m.info.Name, Detail: detail}
}

// BytesOf sums the memory of maps ids at the last reading, nil before the
// first one.
func (w *Watcher) BytesOf(ids []uint32) *uint64 {
	if w == nil {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.readings == 0 {
		return nil
	}
	var n uint64
	for _, id := range ids {
		if m := w.maps[id]; m != nil {
			n += m.info.Memlock
		}
	}
	return &n
}

// Reading is the last reading: when, how entries are counted, what it
// cost, and every map it found.
type Reading struct {
	At         time.Time
	Counting   string
	Cost       collectors.MapsCost
	OwnersTook time.Duration
	Maps       []Map
}

// Map is one map of the last reading: its key in the store, what was read
// of it and when, the processes holding a fd of it, and its first pin.
type Map struct {
	Key    store.InstanceKey
	Info   collectors.MapInfo
	At     time.Time
	Owners []collectors.Owner
	Pin    string
}

// Last is a copy of the last reading, maps in no order.
func (w *Watcher) Last() Reading {
	w.mu.RLock()
	defer w.mu.RUnlock()
	r := Reading{At: w.last, Counting: w.counting, Cost: w.cost, OwnersTook: w.ownersNs, Maps: make([]Map, 0, len(w.maps))}
	for _, m := range w.maps {
		r.Maps = append(r.Maps, Map{Key: m.key, Info: m.info, At: m.at, Owners: m.owners, Pin: m.pin})
	}
	return r
}

// Owners is who holds a map: the processes with a fd of it, then the
// owners of the programs that use it, each pid once; if none, its pin. The
// first is the one it is charged to.
func Owners(direct []collectors.Owner, progs []uint32, progOwners map[uint32][]collectors.Owner, pin string) []collectors.Owner {
	owners := slices.Clone(direct)
	slices.SortFunc(owners, func(a, b collectors.Owner) int { return a.PID - b.PID })
	for _, p := range progs {
		for _, o := range progOwners[p] {
			if !slices.ContainsFunc(owners, func(x collectors.Owner) bool { return x.PID == o.PID }) {
				owners = append(owners, o)
			}
		}
	}
	if len(owners) == 0 && pin != "" {
		owners = []collectors.Owner{{Pin: pin}}
	}
	return owners
}
