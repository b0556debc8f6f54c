// Package store keeps bpfperf's history in one bbolt file: program
// instances, their counter series (compressed chunks), and events.
//
// Only the daemon opens the file; bbolt's flock keeps a second process out.
package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout this code writes. Open migrates older files
// forward and refuses newer ones.
const SchemaVersion = 3

var (
	ErrLocked       = errors.New("store is in use by another process")
	ErrNewerSchema  = errors.New("store was written by a newer bpfperf")
	ErrCorrupt      = errors.New("store is corrupt")
	ErrNotFound     = errors.New("not found")
	ErrNotDirectory = errors.New("state dir is not a directory")
)

var (
	bucketMeta     = []byte("meta")
	bucketBoots    = []byte("boots")
	bucketPrograms = []byte("programs")
	bucketHead     = []byte("head")
	bucketChunks   = []byte("chunks")
	bucketEvents   = []byte("events")
	// Schema 2.
	bucketProfiles = []byte("profiles") // CPU profiles (profiles.go)
	bucketBench    = []byte("bench")    // benchmark runs handed over by `bpfperf bench --store` (bench.go)

	keySchema   = []byte("schema")
	keyNextBoot = []byte("next_boot")
)

// Columns of the program stats series, in chunk order.
const (
	ColRunTimeNs = iota
	ColRunCnt
	ColRecursionMisses
	statsColumns
)

// colCarried is a fourth column of the stats series, after the counters:
// 1 where the sample was carried (Sample.Carried), else 0. Chunks written
// before it have three columns and read as not carried; rollups keep the
// counters only.
const colCarried = statsColumns

// groupStats is the series group of bpf_stats counters; later groups (perf
// counters) get their own series under the same instance.
const groupStats = 0

// groupCounters is the series group of per-program perf counters (cycles,
// instructions, ...), stored raw like bpf_stats.
const groupCounters = 3

// groupLatency is the series group of latency windows (latency.go); the
// last group a series key may carry.
const groupLatency = 4

// InstanceKey identifies one loaded program: the boot it was loaded in (a
// small index assigned by the store) and its kernel program id.
type InstanceKey struct {
	Boot uint32
	ID   uint32
}

func (k InstanceKey) bytes() []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, k.Boot)
	binary.BigEndian.PutUint32(b[4:], k.ID)
	return b
}

func instanceKeyFrom(b []byte) InstanceKey {
	return InstanceKey{Boot: binary.BigEndian.Uint32(b), ID: binary.BigEndian.Uint32(b[4:])}
}

// seriesKey is an instance key plus a group byte.
func seriesKey(k InstanceKey, group byte) []byte { return append(k.bytes(), group) }

// Program is what the store keeps of one program instance.
type Program struct {
	Key        InstanceKey `json:"-"`
	BootID     string      `json:"boot_id"`
	ID         uint32      `json:"id"`
	Name       string      `json:"name"` // the full name (the kernel's cut name before identities were kept)
	KernelName string      `json:"kernel_name,omitempty"`
	Type       string      `json:"type"`
	Tag        string      `json:"tag"`
	// Identity is the key of the program's identity (internal/identity),
	// empty until it is settled (a tick or more after it appeared) and in
	// records written before identities were kept.
	Identity   string          `json:"identity,omitempty"`
	FirstSeen  time.Time       `json:"first_seen"`
	UnloadedAt time.Time       `json:"unloaded_at,omitzero"`
	Meta       json.RawMessage `json:"meta,omitempty"`
}

// Loaded reports whether the program was loaded when last seen.
func (p Program) Loaded() bool { return p.UnloadedAt.IsZero() }

// Sample is one tick's cumulative counters of one instance, in column order.
type Sample struct {
	Key    InstanceKey
	Values [statsColumns]uint64
	// Carried says no counter was read for this interval: stats were off
	// all through it, and the counters moved at the rates of their last
	// on part (daemon/sampler/duty.go). Such an interval repeats that
	// part's figures; it is not a measurement of its own.
	Carried bool
}

// Event explains a change in the graphs.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // "loaded", "unloaded", "new_version", "stats_mode", "daemon_start", "daemon_stop"
	ID   uint32    `json:"id,omitempty"`
	Name string    `json:"name,omitempty"`
	Tag  string    `json:"tag,omitempty"`
	// Identity is the program's identity key, where the event is about
	// one whose identity is settled (new_version, unloaded, findings).
	Identity string `json:"identity,omitempty"`
	Detail   string `json:"detail,omitempty"`
	MapID    uint32 `json:"map_id,omitempty"` // map events: "map_fill", "map_leak"
	// Evidence is what a finding (regression, improvement, shift) rests
	// on, as the daemon wrote it.
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// Tick is everything one sampling tick writes, in one transaction.
type Tick struct {
	Time     time.Time
	Loaded   []Program     // first seen this tick
	Unloaded []InstanceKey // gone since the last tick
	Samples  []Sample
	Events   []Event
}

func (t Tick) hasData() bool {
	return len(t.Loaded) > 0 || len(t.Unloaded) > 0 || len(t.Samples) > 0 || len(t.Events) > 0
}

// DB is an open store.
type DB struct {
	bolt *bolt.DB
	path string

	mu    sync.Mutex
	heads map[string]*chunk // open chunk per series key, cached
	// touched holds raw series written to since the last complete rollup,
	// with their newest sample time (ms): the series the next rollup reads.
	touched map[string]int64

	damaged  atomic.Pointer[string] // running_damage.go
	opened   os.FileInfo            // the file as Open found it (gone.go)
	onDamage func(what string)
	// writeMu serializes writers in front of bbolt's own lock, which an
	// abandoned transaction keeps (safe.go); abandoned says one does.
	writeMu   sync.Mutex
	abandoned atomic.Bool
	counter   counter // counts.go
}

// Options tune Open.
type Options struct {
	// Timeout is how long to wait for another process's lock.
	Timeout time.Duration
	// ReadOnly opens without writing anything, not even a migration.
	ReadOnly bool
	// Context cancels the proof that runs before a writable open (a
	// SIGTERM during start-up); nil is context.Background().
	Context context.Context
}

// Open opens or creates the store file at path and brings its schema up to
// date.
func Open(path string, opts Options) (db *DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(&err)
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if err := proveBeforeOpen(opts, path); err != nil {
		var damage *DamageError
		if errors.As(err, &damage) {
			return nil, err // it names the file
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.Timeout, ReadOnly: opts.ReadOnly, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrChecksum):
		return nil, fmt.Errorf("open %s: %w: %v", path, ErrCorrupt, err)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db = &DB{bolt: b, path: path, heads: map[string]*chunk{}, touched: map[string]int64{}}
	db.opened, _ = os.Stat(path) // bbolt holds its lock: this is the file it opened
	if opts.ReadOnly {
		err = db.checkSchema()
	} else {
		err = db.migrate()
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.loadTouched(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// proveBeforeOpen refuses a damaged store before bbolt maps it. A writable
// open is proved in full (meta pages, then the page tree and every record
// in a child): only a proved store is migrated and written, so a refused one is left byte
// for byte as it was. A read-only open checks the meta pages and the size.
func proveBeforeOpen(opts Options, path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return nil // bbolt creates it, or says why not
	}
	if opts.ReadOnly {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if m := checkMetas(f, fi.Size()); len(m.problems) > 0 {
			return &DamageError{Path: path, Problems: m.problems, Unreadable: !m.readable}
		}
		return nil
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	// In full: a record that does not decode is damage too, found here
	// rather than by the first read that needs it.
	return CheckFile(ctx, path, true)
}

// Close closes the file. A store with an abandoned write transaction
// (safe.go) stays open: bbolt would wait for that transaction forever;
// the file closes, unchanged by it, when the process ends.
func (db *DB) Close() error {
	if db.abandoned.Load() {
		return nil
	}
	return db.bolt.Close()
}

// Path is the store file's path.
func (db *DB) Path() string { return db.path }

// Size is the store file's size in bytes.
func (db *DB) Size() int64 {
	fi, err := os.Stat(db.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// schemaBuckets[i] are the buckets schema i added (migrations[i-1]).
var schemaBuckets = [][][]byte{
	{},
	{bucketMeta, bucketBoots, bucketPrograms, bucketHead, bucketChunks, bucketEvents},
	{bucketProfiles, bucketBench},
	{}, // schema 3 adds the latency series group: no bucket, but older code would call its chunks corrupt
}

// migrations[i] brings a store from schema i to i+1. Schema 0 is an empty
// file.
var migrations = []func(tx *bolt.Tx) error{
	// 0 -> 1: programs, their series, events.
	func(tx *bolt.Tx) error { return createBuckets(tx, schemaBuckets[1]...) },
	// 1 -> 2: profiles and benchmark runs.
	func(tx *bolt.Tx) error { return createBuckets(tx, schemaBuckets[2]...) },
	// 2 -> 3: latency windows, in the series buckets.
	func(tx *bolt.Tx) error { return nil },
}

func createBuckets(tx *bolt.Tx, names ...[]byte) error {
	for _, name := range names {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// UsedBytes is the size of the pages in use: the file can be larger, as
// bbolt grows it ahead of need.
func (db *DB) UsedBytes() int64 {
	var n int64
	db.view(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n
}

// checkSchema refuses a file this code cannot read, without changing it.
func (db *DB) checkSchema() error {
	return db.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: meta bucket missing", ErrCorrupt)
		}
		v := meta.Get(keySchema)
		if len(v) != 4 {
			return fmt.Errorf("%w: schema version missing", ErrCorrupt)
		}
		if version := binary.BigEndian.Uint32(v); version != SchemaVersion {
			return fmt.Errorf("%w: schema %d, this bpfperf reads %d (start bpfperfd once to migrate)", ErrNewerSchema, version, SchemaVersion)
		}
		return nil
	})
}

func (db *DB) migrate() error {
	return db.update(func(tx *bolt.Tx) error {
		version := uint32(0)
		if meta := tx.Bucket(bucketMeta); meta != nil {
			v := meta.Get(keySchema)
			if len(v) != 4 {
				return fmt.Errorf("%w: schema version missing", ErrCorrupt)
			}
			version = binary.BigEndian.Uint32(v)
		} else if tx.Bucket(bucketPrograms) != nil {
			return fmt.Errorf("%w: meta bucket missing", ErrCorrupt)
		}
		if version > SchemaVersion {
			return fmt.Errorf("%w: schema %d, this bpfperf reads up to %d", ErrNewerSchema, version, SchemaVersion)
		}
		for v := version; v < SchemaVersion; v++ {
			if err := migrations[v](tx); err != nil {
				return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
	})
}

// Boot returns the small index the store uses for a kernel boot id,
// assigning the next one for a boot it has not seen.
func (db *DB) Boot(bootID string) (uint32, error) {
	var idx uint32
	err := db.update(func(tx *bolt.Tx) error {
		boots := tx.Bucket(bucketBoots)
		if v := boots.Get([]byte(bootID)); len(v) == 4 {
			idx = binary.BigEndian.Uint32(v)
			return nil
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyNextBoot); len(v) == 4 {
			idx = binary.BigEndian.Uint32(v)
		}
		if err := meta.Put(keyNextBoot, binary.BigEndian.AppendUint32(nil, idx+1)); err != nil {
			return err
		}
		return boots.Put([]byte(bootID), binary.BigEndian.AppendUint32(nil, idx))
	})
	return idx, err
}

// WriteTick stores one tick in one transaction. If the transaction fails
// nothing of the tick is stored and the store stays consistent.
func (db *DB) WriteTick(t Tick) error { return db.WriteTicks([]Tick{t}) }

// WriteTicks stores ticks, in order, in one transaction: all or nothing.
// Ticks with nothing to store (no samples, programs or events) open no
// transaction: an idle tick costs no commit and no fsync.
func (db *DB) WriteTicks(ticks []Tick) error {
	if !slices.ContainsFunc(ticks, Tick.hasData) {
		return nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	err := db.update(func(tx *bolt.Tx) error {
		for _, t := range ticks {
			if err := db.writeTick(tx, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// The cached open chunks may hold appends the failed transaction
		// did not store; reload them from disk on next use.
		clear(db.heads)
		return fmt.Errorf("write tick: %w", err)
	}
	return nil
}

func (db *DB) writeTick(tx *bolt.Tx, t Tick) error {
	ms := t.Time.UnixMilli()
	progs := tx.Bucket(bucketPrograms)
	for _, p := range t.Loaded {
		v, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if err := progs.Put(p.Key.bytes(), v); err != nil {
			return err
		}
	}
	head, chunks := tx.Bucket(bucketHead), tx.Bucket(bucketChunks)
	chunks.FillPercent = 1.0 // chunks are appended in time order per series
	for _, s := range t.Samples {
		key := seriesKey(s.Key, groupStats)
		var v [statsColumns + 1]uint64
		copy(v[:], s.Values[:])
		if s.Carried {
			v[colCarried] = 1
		}
		if err := db.appendSample(head, chunks, key, ms, v[:]); err != nil {
			return err
		}
		db.touched[string(key)] = max(db.touched[string(key)], ms)
	}
	for _, k := range t.Unloaded {
		if err := markUnloaded(progs, k, t.Time); err != nil {
			return err
		}
		if err := db.seal(head, chunks, seriesKey(k, groupStats)); err != nil {
			return err
		}
	}
	return putEvents(tx, t.Events)
}

// loadTouched finds the raw series a rollup may still owe points for after
// a restart: those with an open chunk, and those of instances unloaded after
// the oldest rollup watermark.
func (db *DB) loadTouched() error {
	return db.view(func(tx *bolt.Tx) error {
		oldest := int64(-1)
		for _, res := range resolutions {
			w := int64(0)
			if v := tx.Bucket(bucketMeta).Get(res.watermarkKey()); len(v) == 8 {
				w = int64(binary.BigEndian.Uint64(v))
			}
			if oldest < 0 || w < oldest {
				oldest = w
			}
		}
		err := tx.Bucket(bucketHead).ForEach(func(k, v []byte) error {
			if len(k) == 9 && k[8] == groupStats {
				c, err := decodeChunk(v, nil)
				if err != nil {
					return fmt.Errorf("%w: open chunk %x: %v", ErrCorrupt, k, err)
				}
				db.touched[string(k)] = c.lastT
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketPrograms).ForEach(func(k, v []byte) error {
			var p Program
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("%w: program record %x: %v", ErrCorrupt, k, err)
			}
			if !p.UnloadedAt.IsZero() && p.UnloadedAt.UnixMilli() >= oldest {
				db.touched[string(seriesKey(instanceKeyFrom(k), groupStats))] = p.UnloadedAt.UnixMilli()
			}
			return nil
		})
	})
}

func (db *DB) appendSample(head, chunks *bolt.Bucket, key []byte, ms int64, values []uint64) error {
	c, err := db.openHead(head, key)
	if err != nil {
		return err
	}
	// A sample of another width (a latency window with or without its
	// per-run event) starts a chunk of its own.
	if c != nil && (c.full() || ms < c.lastT || c.columns != len(values)) {
		if err := db.seal(head, chunks, key); err != nil {
			return err
		}
		c = nil
	}
	if c == nil {
		c = &chunk{columns: len(values)}
		db.heads[string(key)] = c
	}
	if err := c.append(ms, values); err != nil {
		return err
	}
	return head.Put(key, c.buf)
}

// openHead returns the series' open chunk, from the cache or the file, or
// nil if it has none.
func (db *DB) openHead(head *bolt.Bucket, key []byte) (*chunk, error) {
	if c, ok := db.heads[string(key)]; ok {
		return c, nil
	}
	v := head.Get(key)
	if v == nil {
		return nil, nil
	}
	c, err := decodeChunk(v, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: open chunk of series %x: %v", ErrCorrupt, key, err)
	}
	db.heads[string(key)] = c
	return c, nil
}

// seal moves a series' open chunk to the sealed chunks, keyed by its start.
func (db *DB) seal(head, chunks *bolt.Bucket, key []byte) error {
	c, err := db.openHead(head, key)
	if err != nil || c == nil {
		return err
	}
	if err := chunks.Put(binary.BigEndian.AppendUint64(append([]byte(nil), key...), uint64(c.t0)), c.buf); err != nil {
		return err
	}
	delete(db.heads, string(key))
	return head.Delete(key)
}

func markUnloaded(progs *bolt.Bucket, k InstanceKey, at time.Time) error {
	v := progs.Get(k.bytes())
	if v == nil {
		return nil
	}
	var p Program
	if err := json.Unmarshal(v, &p); err != nil {
		return fmt.Errorf("%w: program %d: %v", ErrCorrupt, k.ID, err)
	}
	p.UnloadedAt = at
	nv, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return progs.Put(k.bytes(), nv)
}

func putEvents(tx *bolt.Tx, events []Event) error {
	b := tx.Bucket(bucketEvents)
	b.FillPercent = 1.0
	for _, e := range events {
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		key := binary.BigEndian.AppendUint64(nil, uint64(e.Time.UnixNano()))
		if err := b.Put(binary.BigEndian.AppendUint64(key, seq), v); err != nil {
			return err
		}
	}
	return nil
}

// Programs returns every program instance the store knows, loaded or not.
func (db *DB) Programs() ([]Program, error) {
	var out []Program
	err := db.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPrograms).ForEach(func(k, v []byte) error {
			var p Program
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("%w: program record %x: %v", ErrCorrupt, k, err)
			}
			p.Key = instanceKeyFrom(k)
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// Point is one stored sample of a stats series.
type Point struct {
	Time   time.Time
	Values [statsColumns]uint64
	// Carried is the sample's Carried (false in rollups).
	Carried bool
}

// Series returns the instance's raw stats samples with from <= time <= to,
// in time order.
func (db *DB) Series(k InstanceKey, from, to time.Time) ([]Point, error) {
	var out []Point
	err := db.view(func(tx *bolt.Tx) error {
		return readSeries(tx, seriesKey(k, groupStats), from.UnixMilli(), to.UnixMilli(), func(t int64, v []uint64) {
			p := Point{Time: time.UnixMilli(t), Carried: len(v) > colCarried && v[colCarried] != 0}
			copy(p.Values[:], v)
			out = append(out, p)
		})
	})
	return out, err
}

// readSeries calls fn for every sample of the series with fromMs <= t <=
// toMs, in time order: sealed chunks first, then the open one.
func readSeries(tx *bolt.Tx, key []byte, fromMs, toMs int64, fn func(t int64, v []uint64)) error {
	return readSeriesIn(tx.Bucket(bucketHead), tx.Bucket(bucketChunks), key, fromMs, toMs, fn)
}

// readSeriesIn is readSeries over a given pair of open-chunk and sealed-chunk
// buckets.
func readSeriesIn(head, chunks *bolt.Bucket, key []byte, fromMs, toMs int64, fn func(t int64, v []uint64)) error {
	collect := func(t int64, v []uint64) {
		if t >= fromMs && t <= toMs {
			fn(t, v)
		}
	}
	c := chunks.Cursor()
	// The chunk holding fromMs starts at or before it: seek, then step back
	// one if the previous chunk belongs to this series.
	start := binary.BigEndian.AppendUint64(append([]byte(nil), key...), uint64(max(fromMs, 0)))
	if k, _ := c.Seek(start); k == nil || !bytes.Equal(k, start) {
		var prev []byte
		if k == nil {
			prev, _ = c.Last()
		} else {
			prev, _ = c.Prev()
		}
		if prev != nil && hasPrefix(prev, key) && len(prev) == len(key)+8 {
			start = append([]byte(nil), prev...)
		}
	}
	for ck, cv := c.Seek(start); ck != nil && hasPrefix(ck, key) && len(ck) == len(key)+8; ck, cv = c.Next() {
		if int64(binary.BigEndian.Uint64(ck[len(key):])) > toMs {
			break
		}
		if _, _, err := decodeSealed(cv, collect); err != nil {
			return fmt.Errorf("%w: chunk %x: %v", ErrCorrupt, ck, err)
		}
	}
	if hv := head.Get(key); hv != nil {
		if _, err := decodeChunk(hv, collect); err != nil {
			return fmt.Errorf("%w: open chunk %x: %v", ErrCorrupt, key, err)
		}
	}
	return nil
}

func hasPrefix(b, prefix []byte) bool { return bytes.HasPrefix(b, prefix) }

// Events returns events with from <= time <= to, oldest first.
func (db *DB) Events(from, to time.Time) ([]Event, error) {
	var out []Event
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, uint64(from.UnixNano()))); k != nil; k, v = c.Next() {
			if int64(binary.BigEndian.Uint64(k)) > to.UnixNano() {
				break
			}
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("%w: event %x: %v", ErrCorrupt, k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}
