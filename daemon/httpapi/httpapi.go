// Package httpapi is the daemon's API room: the /v1 routes in one table
// (server.go), each handler, and the documents they answer, built from
// what the daemon's other rooms hold and from the store; the opt-in TCP
// listener (web.go) and the dashboard's routes. It reads the rooms, never
// the daemon's root, which builds it with New.
package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/mapwatch"
	"github.com/bpfperf/bpfperf/daemon/metrics"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/store"
)

// Config is what the answers say of the daemon's configuration, and how
// the TCP listener runs.
type Config struct {
	Version     string
	Interval    time.Duration // sampling interval
	MapsEvery   time.Duration // --maps.every
	Regressions regress.Config
	Web         WebConfig
	Logger      *slog.Logger
	// Now is the daemon's clock: the defaults of since and until, and how
	// fresh a figure is.
	Now func() time.Time
}

// Rooms are the parts of the daemon the API reads.
type Rooms struct {
	Store     *store.DB
	Stats     *collectors.Stats
	Sampler   *sampler.Sampler
	Profiling *profiling.Profiling
	Counters  *counters.Counters
	Maps      *mapwatch.Watcher
	Metrics   *metrics.Metrics
	// This boot: its id and its number in the store.
	BootID string
	Boot   uint32
	// Started is when the daemon started (its clock).
	Started time.Time
	// Self is the daemon's own CPU % (of one core, over the last minute),
	// resident and live heap bytes.
	Self func() (cpuPercent float64, rss, heapLive int64)
	// StatsCost is what bpf_stats costs this host now.
	StatsCost func() *api.StatsCost
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

// OwnersLive is every owner with what is charged to it now, as GET
// /v1/owners answers (the per-owner series of /metrics).
func (a *API) OwnersLive() []api.OwnerRow { return a.d.ownersLive() }
