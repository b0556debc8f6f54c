// Package storegen writes synthetic program history into a store as fast as
// the store takes it, for benchmarks and tests: days of samples in seconds.
// It follows the daemon's write policy (changed counters every tick, idle
// ones once a minute) and rolls up every simulated minute.
package storegen

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// Mix is how many programs of each behaviour to simulate.
type Mix struct {
	Idle   int // never run
	Steady int // a constant rate with 1% jitter
	Bursty int // busy for seconds, then idle for minutes
}

// Total is the number of programs.
func (m Mix) Total() int { return m.Idle + m.Steady + m.Bursty }

// Config describes a run.
type Config struct {
	Mix      Mix
	Start    time.Time
	Duration time.Duration
	Interval time.Duration // default 1 s
	Batch    int           // ticks per transaction; 1 is what the daemon does
	Seed     uint64
	BootID   string
	// FirstID is the first program id (to add programs to an existing
	// store without colliding).
	FirstID uint32
}

// Result counts what was generated.
type Result struct {
	Ticks   int
	Logical int64 // program x tick samples, as the daemon sees them
	Stored  int64 // samples written after skipping idle ticks
}

type program struct {
	id              uint32
	kind            int // 0 idle, 1 steady, 2 bursty
	rate, nsPerRun  float64
	busyUntil, next int
	rt, cnt         uint64
	stRT, stCnt     uint64
	stored          bool
}

// Generate writes cfg's history into db.
func Generate(db *store.DB, cfg Config) (Result, error) {
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1
	}
	if cfg.BootID == "" {
		cfg.BootID = "storegen"
	}
	boot, err := db.Boot(cfg.BootID)
	if err != nil {
		return Result{}, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 42))
	var progs []*program
	for kind, n := range []int{cfg.Mix.Idle, cfg.Mix.Steady, cfg.Mix.Bursty} {
		for range n {
			p := &program{id: cfg.FirstID + uint32(len(progs)) + 1, kind: kind}
			p.rate = 100 + rng.Float64()*50_000
			p.nsPerRun = 30 + rng.Float64()*2000
			progs = append(progs, p)
		}
	}
	ticks := int(cfg.Duration / cfg.Interval)
	heartbeat := uint64(time.Minute / cfg.Interval)
	var res Result
	batch := make([]store.Tick, 0, cfg.Batch)
	lastRollup := cfg.Start.Truncate(time.Minute)
	flush := func(now time.Time) error {
		if len(batch) == 0 {
			return nil
		}
		if err := db.WriteTicks(batch); err != nil {
			return err
		}
		batch = batch[:0]
		if now.Truncate(time.Minute) != lastRollup {
			lastRollup = now.Truncate(time.Minute)
			return db.Rollup(now)
		}
		return nil
	}
	secs := cfg.Interval.Seconds()
	for i := 0; i < ticks; i++ {
		// A ticker drifts a few milliseconds around the interval.
		now := cfg.Start.Add(time.Duration(i)*cfg.Interval + time.Duration(rng.IntN(5))*time.Millisecond)
		t := store.Tick{Time: now}
		for _, p := range progs {
			key := store.InstanceKey{Boot: boot, ID: p.id}
			if i == 0 {
				t.Loaded = append(t.Loaded, store.Program{Key: key, BootID: cfg.BootID, ID: p.id, Name: fmt.Sprintf("gen_%d", p.id), Type: "xdp", Tag: fmt.Sprintf("%016x", p.id), FirstSeen: now})
			}
			runs := 0.0
			switch p.kind {
			case 1:
				runs = p.rate * secs * (0.99 + 0.02*rng.Float64())
			case 2:
				if i >= p.next {
					p.busyUntil = i + 1 + rng.IntN(30)
					p.next = p.busyUntil + rng.IntN(300)
				}
				if i < p.busyUntil {
					runs = p.rate * 5 * secs * rng.Float64()
				}
			}
			p.cnt += uint64(runs)
			p.rt += uint64(runs * p.nsPerRun * (0.95 + 0.1*rng.Float64()))
			res.Logical++
			changed := !p.stored || p.cnt != p.stCnt || p.rt != p.stRT
			if changed || store.IdleHeartbeat(uint64(i), p.id, heartbeat) {
				t.Samples = append(t.Samples, store.Sample{Key: key, Values: [3]uint64{p.rt, p.cnt, 0}})
				p.stored, p.stCnt, p.stRT = true, p.cnt, p.rt
				res.Stored++
			}
		}
		batch = append(batch, t)
		res.Ticks++
		if len(batch) == cfg.Batch {
			if err := flush(now); err != nil {
				return res, err
			}
		}
	}
	return res, flush(cfg.Start.Add(cfg.Duration))
}
