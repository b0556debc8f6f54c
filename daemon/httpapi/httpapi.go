// Package httpapi is the daemon's API room: the /v1 routes in one table
// (server.go: pattern, parameters, handler), each handler, the errors'
// status codes, the opt-in TCP listener (web.go) and the dashboard's
// routes. A handler parses its request, asks a room or the documents
// (daemon/query) and writes the answer; it reads each room through an
// interface defined here (Rooms), never the daemon's root, which builds
// it with New.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	pprof "github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/query"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// Config is what the answers say of the daemon's configuration, and how
// the TCP listener runs.
type Config struct {
	Version  string
	Interval time.Duration // sampling interval
	Web      WebConfig
	Logger   *slog.Logger
	// Now is the daemon's clock: the defaults of since and until, and how
	// fresh a figure is.
	Now func() time.Time
}

// Rooms are the parts of the daemon the API reads, each through an
// interface defined here with only what the handlers call, so that a
// handler can be read, and tested, without the room behind it.
type Rooms struct {
	Store     Store
	Stats     Stats
	Sampler   SamplerStatus
	Profiling Profiling
	Counters  Counters
	Latency   Latency
	Metrics   prometheus.TransactionalGatherer // /metrics on the TCP listener
	// Query builds the documents: programs, history, maps, owners,
	// events, findings, checks.
	Query *query.Query
	// This boot's id.
	BootID string
	// Started is when the daemon started (its clock).
	Started time.Time
	// Self is the daemon's own CPU % (of one core, over the last minute),
	// resident and live heap bytes.
	Self func() (cpuPercent float64, rss, heapLive int64)
	// StatsCost is what bpf_stats costs this host now.
	StatsCost func() *api.StatsCost
	// MeasureStatsCost measures it again (stats off for a moment) and
	// answers the new figure.
	MeasureStatsCost func(context.Context) (*api.StatsCost, error)
	// Pods says in one line where containers' pod names come from, or
	// why there are none (daemon/podnames); nil: not asked.
	Pods func() string
}

// Store is what the handlers read and write of the store themselves: its
// health and size, exports, profiles and bench runs. The documents read
// the rest (query.Store).
type Store interface {
	profiling.StoredProfiles
	Path() string
	Size() int64
	Damaged() string
	Gone() string
	Stats() (store.Stats, error)
	Check() ([]string, error)
	Counts(wait time.Duration) store.Counts
	Export(from, to time.Time, fn func(store.ExportRow) error) error
	PutBenchRun(run store.BenchRun, report []byte) (store.BenchRun, error)
	ListBenchRuns(from, to time.Time) ([]store.BenchRun, error)
	GetBenchRun(id uint64) (store.BenchRun, []byte, error)
}

// Stats is how bpf_stats is on.
type Stats interface {
	Mode() collectors.StatsMode
	Detail() string
}

// SamplerStatus is the sampler's figures for /v1/status.
type SamplerStatus interface {
	Status() sampler.Status
}

// Profiling is the profiler's status and its on-demand captures.
type Profiling interface {
	Status() *api.ProfilingStatus
	// Profiler is the running sampler (errs.ProfilingUnavailable when
	// profiling is off or refused).
	Profiler() (*profile.Profiler, error)
	Capture(ctx context.Context, prof *profile.Profiler, ev perfevent.Event, dur time.Duration) (*pprof.Profile, error)
	Store(p *pprof.Profile, kind string) (store.ProfileInfo, string, error)
}

// Counters is the perf counters' status, targets, and enable/disable.
type Counters interface {
	Status() *api.CountersStatus
	List() api.CountersList
	Enable(ctx context.Context, enable bool, key store.InstanceKey, name string, window time.Duration) (api.CounterTarget, error)
}

// Latency is the latency room's status and its on-demand windows.
type Latency interface {
	Status() *api.LatencyStatus
	// Time opens a window on the loaded instance key for d and answers
	// when it ends (ctx done stops it early).
	Time(ctx context.Context, key store.InstanceKey, name string, d time.Duration) (api.LatencyWindow, error)
}

// daemon is what the handlers read: the rooms and the configuration.
type daemon struct {
	cfg Config
	Rooms
}

// now reads the daemon's clock.
func (d *daemon) now() time.Time { return d.cfg.Now() }

// API answers the daemon's HTTP API.
type API struct{ d *daemon }

// New builds the API over the rooms.
func New(cfg Config, r Rooms) *API { return &API{&daemon{cfg: cfg, Rooms: r}} }

// Handler answers /v1 on the unix socket.
func (a *API) Handler() http.Handler { return (&server{d: a.d}).routes() }

// StartWeb opens the TCP listener, if configured, and serves it until the
// returned stop is called.
func (a *API) StartWeb() (stop func(), err error) { return a.d.startWeb() }
