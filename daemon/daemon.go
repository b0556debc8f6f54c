package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/loadrec"
	"github.com/bpfperf/bpfperf/collectors/netspace"
	"github.com/bpfperf/bpfperf/daemon/counters"
	"github.com/bpfperf/bpfperf/daemon/holders"
	"github.com/bpfperf/bpfperf/daemon/httpapi"
	"github.com/bpfperf/bpfperf/daemon/latency"
	"github.com/bpfperf/bpfperf/daemon/loaders"
	"github.com/bpfperf/bpfperf/daemon/mapwatch"
	"github.com/bpfperf/bpfperf/daemon/metrics"
	"github.com/bpfperf/bpfperf/daemon/podnames"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/query"
	"github.com/bpfperf/bpfperf/daemon/regressions"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/daemon/selfcost"
	"github.com/bpfperf/bpfperf/daemon/statscost"
	"github.com/bpfperf/bpfperf/internal/cadence"
	"github.com/bpfperf/bpfperf/internal/podman"
	"github.com/bpfperf/bpfperf/store"
)

// Daemon is a running bpfperfd.
type Daemon struct {
	cfg     Config
	store   *store.DB
	stats   *collectors.Stats
	sampler *sampler.Sampler
	bootID  string
	boot    uint32
	started time.Time
	cost    selfcost.Cost
	// lastLoop is when the sampling loop last finished a tick (unix ns).
	lastLoop atomic.Int64
	prof     *profiling.Profiling
	ctr      *counters.Counters
	lat      *latency.Latency
	metrics  *metrics.Metrics
	api      *httpapi.API
	query    *query.Query
	maps     *mapwatch.Watcher
	// statsCost is bpf_stats' cost per run, measured before stats went on
	// and again on demand or when the online CPUs change (statscost.go).
	statsCost atomic.Pointer[statscost.Measured]
	duty      *sampler.DutyCycle
	cpus      *cpuWatch
	// loaders follows the kernel's load records; nil where it cannot.
	loaders *loaders.Loaders
	// pods names containers by their Kubernetes pods, from the CRI
	// socket; it names none where there is none.
	pods *podnames.Names

	// detector is regression detection (daemon/regressions), fed by the
	// sampling loop only.
	detector *regressions.Detector
}

// now reads the daemon's clock (Config.Now).
func (d *Daemon) now() time.Time { return d.cfg.Now() }

// Run starts bpfperfd and blocks until ctx is done or sampling fails for
// good. Stats are put back as found on every way out, panics included.
// It is the composition root: it opens what the daemon holds, wires the
// rooms (assemble) and runs them (runUntil).
func Run(ctx context.Context, cfg Config) (err error) {
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	if err := checkStart(&cfg); err != nil {
		return err
	}
	lock, err := acquireHostLock(ctx, cfg.HostLock, cfg.Socket, cfg.HostLockWait, log)
	if err != nil {
		return err
	}
	defer lock.release()
	// After the lock: a daemon that waited for it finds the socket of the
	// one that held it closed, not answering.
	if err := checkSocketFree(cfg.Socket); err != nil {
		return err
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	bootID, err := readBootID(cfg.ProcRoot)
	if err != nil {
		return err
	}
	boot, err := db.Boot(bootID)
	if err != nil {
		return fmt.Errorf("store boot id: %w", err)
	}
	sw, err := sampler.NewSweeper(sampler.SweepConfig{Mode: cfg.Sweep, FailLoad: cfg.SweepFailLoad, Logger: log}, cfg.Now())
	if err != nil {
		return err
	}
	defer sw.Close()

	cost := statscost.Measure(cfg.Now(), log)
	stats, err := collectors.EnableStats(collectors.StatsConfig{ProcRoot: cfg.ProcRoot, Mode: cfg.StatsMode})
	if err != nil {
		return fmt.Errorf("enable BPF run-time stats: %w", err)
	}
	// Put stats back however we leave, including a panic in this goroutine;
	// the sampler goroutine does the same for its own panics.
	defer func() {
		if rerr := stats.Restore(); rerr != nil {
			log.Error("restore BPF stats", "err", rerr)
		}
		if p := recover(); p != nil {
			panic(p)
		}
	}()
	log.Info("BPF run-time stats on", "mode", stats.Mode(), "detail", stats.Detail())
	duty, err := startDuty(cfg, stats, cost)
	if err != nil {
		return err
	}
	if duty != nil {
		defer duty.Stop()
	}
	kind, detail, _, _, _ := sw.State()
	log.Info("sweep", "kind", kind, "detail", detail)

	scanner := holders.New(cfg.ProcRoot, log)
	defer scanner.Close()
	// Loads from now on are known by their loader (daemon/loaders); where
	// the kernel refuses the records, runners come from holders alone.
	// Containers are named by their pods where the node's CRI socket
	// answers: asked in the background, never on the sampler's tick or
	// the load records' ring.
	pods := podnames.Open(podnames.Config{Socket: cfg.CRISocket, Logger: log})
	defer pods.Close()
	lds, err := loaders.Start(cfg.ProcRoot, log, pods)
	if err != nil {
		log.Warn("loaders unknown: the kernel's load records could not be followed; runners come from what holds each program", "err", err)
	}
	defer lds.Close()
	d := &Daemon{cfg: cfg, store: db, stats: stats, bootID: bootID, boot: boot, started: cfg.Now(), duty: duty, cpus: newCPUWatch(cfg.CPUsOnlineFile)}
	defer d.cpus.close()
	d.statsCost.Store(&cost)
	d.loaders = lds
	d.pods = pods
	if err := d.assemble(sw, scanner, duty); err != nil {
		return err
	}
	defer d.maps.Close()
	lds.OnLoad(d.prof.Learn)
	lds.OnCode(func(k loadrec.Ksym, gone bool) { d.prof.Code(k.Addr, k.Len, k.Name, gone) })

	if err := d.writeStart(duty); err != nil {
		return err
	}
	return d.runUntil(ctx)
}

// checkStart proves, before anything is opened, that the daemon may read
// programs and that its paths are usable (the socket is checked once the
// host lock is held). A first sweep that skipped a few programs (a
// partial refusal) read the rest, which is enough.
func checkStart(cfg *Config) error {
	var skipped *collectors.SkippedError
	if _, err := collectors.Sweep(nil); err != nil && !errors.As(err, &skipped) {
		if errors.Is(err, collectors.ErrNotPermitted) {
			return fmt.Errorf("%w: %w", ErrNotPrivileged, err)
		}
		return fmt.Errorf("read programs: %w", err)
	}
	return cfg.checkPaths()
}

// openStore opens the store in the state dir; damage found while running
// stops its writes and is logged with what to do.
func openStore(ctx context.Context, cfg Config) (*store.DB, error) {
	path := filepath.Join(cfg.StateDir, StoreFile)
	db, err := store.Open(path, store.Options{Context: ctx})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return nil, fmt.Errorf("%w: %s is locked by another bpfperfd", ErrSocketInUse, path)
		}
		return nil, refusedStore(path, err)
	}
	db.OnDamage(func(what string) {
		cfg.Logger.Error("store found damaged while running: writes to it are stopped; sampling and live figures go on",
			"store", path, "damage", what, "run", "stop bpfperfd, then bpfperf store salvage --file "+path+" --to NEW.db")
	})
	return db, nil
}

// startDuty starts the stats duty cycle: a fixed --stats.duty below
// 100%, or the --stats.budget (nil with stats on all the time).
func startDuty(cfg Config, stats *collectors.Stats, cost statscost.Measured) (*sampler.DutyCycle, error) {
	duty, err := sampler.StartDuty(sampler.DutyConfig{
		Percent: cfg.StatsDuty, Budget: cfg.StatsBudget, NsPerRun: cost.NsPerRun(), NotMeasured: cost.Err,
		Interval: cfg.Interval, Stats: stats, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return duty, nil
}

// devicesOf reads programs on network devices in every network
// namespace, a pod's eth0 named as the pod's (collectors/netspace): by
// namespace and name for people and by namespace and workload in
// identities, where the container runtime has told them; nil, netlink's
// in the daemon's own namespace only, where its own cannot be read.
func devicesOf(cfg Config, names *podnames.Names) sampler.Devices {
	label := func(_ uint64, podCgroup string) netspace.Name {
		if podCgroup == "" {
			return netspace.Name{}
		}
		p, pending := names.Lookup(podCgroup)
		if p == nil || p.Namespace == "" || p.Pod == "" {
			return netspace.Name{Pending: pending}
		}
		n := netspace.Name{Label: "pod " + p.Namespace + "/" + p.Pod}
		if p.Workload != "" {
			n.Key = "pod " + p.Namespace + "/" + p.Workload
		}
		return n
	}
	devs, err := netspace.New(netspace.Config{ProcRoot: cfg.ProcRoot, Label: label})
	if err != nil {
		cfg.Logger.Warn("devices in other network namespaces are not told apart", "err", err)
		return nil
	}
	return devs
}

// assemble makes the rooms and wires them: each one's calls upward are
// hooks set here.
func (d *Daemon) assemble(sw *sampler.Sweeper, scanner *holders.Scanner, duty *sampler.DutyCycle) error {
	cfg, db, log := d.cfg, d.store, d.cfg.Logger
	profCfg := cfg.Profile
	// Every program appeared is learned at once from the load records, or
	// within a tick from the sweep (Hooks.Appeared).
	profCfg.Told = d.loaders != nil || cfg.Interval <= time.Second
	d.prof = profiling.New(profCfg, db, log, cfg.Now, cfg.ProcRoot)
	var loaderSource sampler.LoaderSource
	if d.loaders != nil {
		loaderSource = d.loaders
	}
	ctrs := podman.New("") // names Podman's containers where no pod does
	smp, err := sampler.New(sampler.Config{Interval: cfg.Interval, OwnersEvery: cfg.OwnersEvery, BPFFS: cfg.BPFFS, Logger: log, Duty: duty, Loaders: loaderSource, Pods: d.pods, Containers: ctrs, LinksFailReads: cfg.LinksFailReads, Devices: devicesOf(cfg, d.pods)},
		sw, scanner, db, d.bootID, d.boot, sampler.Hooks{
			Appeared: func(id uint32, name string) {
				d.prof.Learn(id)
				d.ctr.Appeared(id, name)
			},
			Ticked: func(sweep, write time.Duration) {
				d.metrics.Observe(sweep, write)
				d.remeasureOnHotplug()
			},
		})
	if err != nil {
		return err
	}
	d.sampler = smp
	d.ctr = counters.New(cfg.Counters, counters.Deps{Sampler: smp, Profiler: d.prof, Store: db, Logger: log, Now: cfg.Now, Boot: d.boot, ProcRoot: cfg.ProcRoot, Interval: cfg.Interval})
	d.lat = latency.New(cfg.Latency, latency.Deps{Sampler: smp, Store: db, Logger: log, Now: cfg.Now, ProcRoot: cfg.ProcRoot})
	d.maps = mapwatch.New(mapwatch.Config{Every: cfg.MapsEvery, LeakWindow: cfg.MapsLeakWindow, WalkBudget: cfg.MapsWalkBudget, BPFFS: cfg.BPFFS, Logger: log},
		scanner, db, d.bootID, d.boot, d.sampler.MapUsers)
	d.metrics = metrics.New(metricsSource{d}, cfg.Web.MaxPrograms)
	d.detector = regressions.New(cfg.Regressions, regressions.Deps{
		Sampler: smp, Store: db, Logger: log, ProfilesOn: cfg.Profile.Every > 0, Found: d.metrics.Found, Timed: d.lat.TimedBetween,
	})
	d.query = &query.Query{
		Store: db, Sampler: smp, Profiling: d.prof, Triggered: d.prof, Maps: d.maps, Counters: d.ctr, Pods: d.pods, Containers: ctrs,
		BootID: d.bootID, Boot: d.boot, MapsEvery: cfg.MapsEvery, Regressions: cfg.Regressions, Now: cfg.Now,
	}
	d.api = httpapi.New(httpapi.Config{
		Version: cfg.Version, Interval: cfg.Interval, Logger: log, Now: cfg.Now, Web: cfg.Web,
	}, httpapi.Rooms{
		Store: db, Stats: d.stats, Sampler: smp, Profiling: d.prof, Counters: d.ctr, Latency: d.lat, Metrics: d.metrics, Query: d.query,
		BootID: d.bootID, Started: d.started, Self: d.self, StatsCost: d.statsCostStatus, MeasureStatsCost: d.measureStatsCost,
		Pods: d.pods.Status,
	})
	d.cost.Sample(d.started)
	d.lastLoop.Store(d.started.UnixNano())
	return nil
}

// serve answers the API on the unix socket, and on the TCP listener if
// one is configured, until stop is called.
func (d *Daemon) serve() (stop func(), err error) {
	ln, err := listen(d.cfg.Socket, d.cfg.SocketGroup)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: auditChanges(d.cfg.Logger, d.api.Handler()), ReadHeaderTimeout: 5 * time.Second, ConnContext: withPeerCred}
	go srv.Serve(ln)
	stopWeb, err := d.api.StartWeb()
	if err != nil {
		srv.Close()
		os.Remove(d.cfg.Socket)
		return nil, err
	}
	return func() {
		stopWeb()
		srv.Close()
		os.Remove(d.cfg.Socket)
	}, nil
}

// writeStart stores the start's events.
func (d *Daemon) writeStart(duty *sampler.DutyCycle) error {
	events := []store.Event{
		{Time: d.started, Kind: "daemon_start", Detail: d.cfg.Version},
		{Time: d.started, Kind: "stats_mode", Detail: d.stats.Detail()},
	}
	if duty != nil && duty.Fixed() {
		// History marks what this run stores as estimates (query/estimates.go).
		events = append(events, store.Event{Time: d.started, Kind: query.EventStatsDuty, Detail: duty.Status()})
	}
	return d.store.WriteTick(store.Tick{Time: d.started, Events: events})
}

// runUntil runs the sampling loop and every room's own loop, and answers
// the API, until ctx is done or sampling fails for good, then stops them,
// waits for what they store as they stop, and stores the stop. The API
// answers only once profiling, counters and latency have started (or
// said why not), so status shows them from its first answer: with the
// kernel filter on, profiling takes 50-200 ms more to start, and status
// read in that time had no profiling or counters at all (issue 46).
func (d *Daemon) runUntil(ctx context.Context) (err error) {
	log := d.cfg.Logger
	errc := make(chan error, 1)
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				d.stats.Restore()
				panic(p)
			}
		}()
		errc <- d.loop(loopCtx)
	})
	go d.watchdog(loopCtx)
	if err := d.prof.Start(loopCtx, profiling.Hooks{WindowStarts: d.ctr.WindowStarts, WindowEnds: d.ctr.WindowEnds, Loaded: d.sweptIDs}); err != nil {
		log.Warn("CPU profiling off", "err", err)
	}
	if err := d.ctr.Start(loopCtx); err != nil {
		log.Warn("perf counters off", "err", err)
	}
	d.lat.Start(loopCtx)
	go d.expire(loopCtx)
	wg.Go(func() { d.maps.Run(loopCtx, d.now) })
	stopServing, err := d.serve()
	if err == nil {
		defer stopServing()
		sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
		log.Info("bpfperfd ready", "socket", d.cfg.Socket, "store", d.store.Path(), "interval", d.cfg.Interval, "web", d.cfg.Web.ListenAddress)
		select {
		case <-ctx.Done():
		case err = <-errc:
		}
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	stop()
	wg.Wait()
	// Their last windows, cut short, are stored before the store closes.
	d.prof.Wait()
	d.ctr.Wait()
	d.lat.Wait()
	now := d.now()
	if werr := d.store.WriteTick(store.Tick{Time: now, Events: []store.Event{{Time: now, Kind: "daemon_stop"}}}); werr != nil {
		log.Warn("store stop event", "err", werr)
	}
	return err
}

// housekeepingEvery is how often the loop hands idle heap back and checks
// the store file is still there.
const housekeepingEvery = 10 * time.Second

// self is the daemon's own CPU % (of one core, over the last minute),
// resident and live heap bytes, for status.
func (d *Daemon) self() (cpuPercent float64, rss, heapLive int64) {
	cpuPercent, rss = d.cost.Read()
	return cpuPercent, rss, selfcost.HeapLiveBytes()
}

// loop samples now and at each whole multiple of the interval until ctx
// is done (cadence: the other periodic jobs wake at the same instants). A
// failed tick is logged and retried next tick; it does not stop the
// daemon (a restart would not fix a full disk).
func (d *Daemon) loop(ctx context.Context) error {
	var panicAt <-chan time.Time
	if d.cfg.PanicAfter > 0 {
		panicAt = time.After(d.cfg.PanicAfter)
	}
	ticker := cadence.NewTicker(d.cfg.Interval)
	defer ticker.Stop()
	first := true
	var lastRollup, lastHousekeeping time.Time
	var goneLogged bool
	for {
		now := d.now()
		if err := d.sampler.Tick(now, first); err == nil {
			first = false
		} else if !d.sampler.StoreFailing() {
			d.cfg.Logger.Error("sample", "err", err)
		}
		d.detector.Tick(now)
		// Fold complete minutes into rollups here, after the tick, so they
		// always see every sample written before them.
		if now.Sub(lastHousekeeping) >= housekeepingEvery {
			selfcost.ReturnIdleMemory()
			// A store file removed under the daemon (its directory
			// wiped, say) takes every later write with it when the
			// daemon stops: say so once, loudly, rather than go on
			// silently.
			if gone := d.store.Gone(); gone != "" && !goneLogged {
				d.cfg.Logger.Error("store", "err", gone, "path", d.store.Path(), "fix", "restart bpfperfd to start a new store there")
				goneLogged = true
			}
			lastHousekeeping = now
		}
		if now.Truncate(time.Minute) != lastRollup && d.store.Damaged() == "" {
			if err := d.store.Rollup(now); err != nil {
				d.cfg.Logger.Warn("rollup", "err", err)
			} else {
				lastRollup = now.Truncate(time.Minute)
			}
		}
		d.lastLoop.Store(time.Now().UnixNano())
		d.cost.Sample(now)
		select {
		case <-ctx.Done():
			return nil
		case <-panicAt:
			panic("bpfperfd: --debug.panic-after reached")
		case <-ticker.C:
		}
	}
}

// expire deletes data past its retention and packs old chunks into
// segments every few minutes, in small transactions that let ticks through.
func (d *Daemon) expire(ctx context.Context) {
	t := cadence.NewTicker(expireEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.store.Damaged() != "" {
			continue // nothing is written to a damaged store
		}
		start := time.Now()
		n, err := d.store.Expire(d.now(), d.cfg.Retention)
		if err != nil {
			d.cfg.Logger.Warn("expire old data", "err", err)
		} else if n != (store.Expired{}) {
			d.cfg.Logger.Info("expired old data", "chunks", n.Chunks, "programs", n.Programs, "events", n.Events, "took", time.Since(start))
		}
		if nb, err := d.store.ExpireBench(d.now(), d.cfg.Retention); err != nil {
			d.cfg.Logger.Warn("expire bench runs", "err", err)
		} else if nb > 0 {
			d.cfg.Logger.Info("expired bench runs", "runs", nb)
		}
		if n, err := d.store.ExpireMaps(d.now(), d.cfg.Retention.Minute); err != nil {
			d.cfg.Logger.Warn("expire map readings", "err", err)
		} else if n > 0 {
			d.cfg.Logger.Info("expired map readings", "chunks_and_maps", n)
		}
		// Pack complete days (weeks, quarters for rollups) into segments.
		if segs, err := d.store.Merge(d.now()); err != nil {
			d.cfg.Logger.Warn("merge old chunks", "err", err)
		} else if segs > 0 {
			d.cfg.Logger.Info("merged old chunks", "segments", segs)
		}
	}
}

// watchdog pings systemd while the sampling loop makes progress, so a hung
// sampler gets the daemon restarted. It returns at once without a watchdog.
func (d *Daemon) watchdog(ctx context.Context) {
	every, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || every == 0 {
		return
	}
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if time.Since(time.Unix(0, d.lastLoop.Load())) < d.cfg.Interval+every {
				sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
			}
		}
	}
}

func readBootID(procRoot string) (string, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/random/boot_id"))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// sweptIDs are the programs loaded at the sampler's last sweep, while it
// is at most two intervals old: what the profiler's symbolizer keeps
// (profile.SymbolizerConfig.Loaded).
func (d *Daemon) sweptIDs() (ids []uint32, ok bool) {
	d.sampler.Read(func(v sampler.View) {
		if v.LastTick().IsZero() || d.now().Sub(v.LastTick()) > 2*d.cfg.Interval {
			return
		}
		ids, ok = make([]uint32, 0, v.Len()), true
		for id := range v.Programs() {
			ids = append(ids, id)
		}
	})
	return ids, ok
}
