// Package query builds the daemon's /v1 documents: program rows and
// detail, history, counter windows, events of a program, maps, owners,
// regression findings and checks. It reads the sampler's view, the other
// rooms' per-program figures and the store, each through an interface it
// defines here, and knows nothing of HTTP: httpapi parses a request, calls
// a Query method, and writes what it returns.
package query

import (
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/mapwatch"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/store"
)

// Store is what the documents read of the store.
type Store interface {
	Programs() ([]store.Program, error)
	// Damaged says why the store cannot list programs ("" when it can).
	Damaged() string
	Series(k store.InstanceKey, from, to time.Time) ([]store.Point, error)
	RolledUpTo(res store.Resolution) (time.Time, error)
	Rollups(k store.InstanceKey, res store.Resolution, from, to time.Time) ([]store.RollupPoint, error)
	CounterSeries(k store.InstanceKey, from, to time.Time) ([]store.CounterSample, error)
	LatencySeries(k store.InstanceKey, from, to time.Time) ([]store.LatencyWindow, error)
	LastLatency(k store.InstanceKey) (store.LatencyWindow, bool, error)
	Maps() ([]store.MapRecord, error)
	MapSeries(k store.InstanceKey, from, to time.Time) ([]store.MapPoint, error)
	Boot(bootID string) (uint32, error)
	Events(from, to time.Time) ([]store.Event, error)
	LastEventBefore(t time.Time, kinds ...string) (*store.Event, error)
}

// Live is the sampler's read side: the loaded programs as of the last
// tick, read under its lock, and which programs use each map.
type Live interface {
	Read(fn func(sampler.View))
	MapUsers() (users map[uint32][]uint32, owners map[uint32][]collectors.Owner)
}

// Profiles gives a program's CPU % as the profiler sampled it.
type Profiles interface {
	SampledCPU(id uint32) *float64
}

// Maps is the map watcher's last reading.
type Maps interface {
	Last() mapwatch.Reading
	// BytesOf is the memory of the maps with these ids (nil: none read).
	BytesOf(ids []uint32) *uint64
}

// Counters fills a program's row with its perf counters.
type Counters interface {
	Fill(row *api.ProgRow)
}

// Pods names a container's pod from its cgroup, from what it knows now
// (daemon/podnames): a document is never held up by the runtime.
type Pods interface {
	Lookup(cgroup string) (pod *collectors.Pod, pending bool)
}

// ContainerNames names a plain runtime's container (Podman) from its
// cgroup: the name it was given, "" for none. It never waits on a daemon.
type ContainerNames interface {
	Name(cgroup string) string
}

// Query builds the documents. Every field is set by the daemon's Run.
type Query struct {
	Store     Store
	Sampler   Live
	Profiling Profiles
	Triggered Triggered
	Maps      Maps
	Counters  Counters
	// Pods names containers by their pods; nil: by ids only.
	Pods Pods
	// Containers names containers no pod names by their runtime's
	// names (internal/podman); nil: by ids.
	Containers ContainerNames
	// This boot: its id and its number in the store.
	BootID string
	Boot   uint32
	// MapsEvery is --maps.every, which the maps document reports.
	MapsEvery time.Duration
	// Regressions is the detector's configuration, which a check
	// compares with (the default where it is unset).
	Regressions regress.Config
	// Now is the daemon's clock.
	Now func() time.Time
}

// PointCounters are a stored sample's cumulative counters, as the API
// gives them.
func PointCounters(p store.Point) api.Counters {
	v := p.Values
	return api.Counters{RunTimeNs: v[store.ColRunTimeNs], RunCnt: v[store.ColRunCnt], RecursionMisses: v[store.ColRecursionMisses]}
}

// NonNil is s, or an empty list for none: the API answers [], not null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// maxPoints bounds one history answer, so a request cannot make the
// daemon build an unbounded response.
const maxPoints = 100_000
