package daemon

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promcollectors "github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
)

// /metrics (issue 13). A scrape reads what the sampler, the profiler and
// the counter windows already hold: no kernel read of its own. Counters are
// in base units with _total; a program's series are labelled id (its
// kernel id), and bpfperf_program_info{id,...} = 1 carries the rest to join
// on. Average ns per run is rate(run_time_seconds_total) /
// rate(runs_total) in PromQL.

// BPFStatsCostPerRun is what bpf_stats adds to each program run, measured
// on kernel 6.18 here: an empty program takes 10 ns per run without stats
// and 55 ns with them (DESIGN.md). Exported as a gauge so a dashboard can
// show what monitoring costs: rate(runs_total) × this.
const BPFStatsCostPerRun = 45 * time.Nanosecond

// otherID labels the sums of the programs beyond --web.max-programs.
const otherID = "other"

// metrics is the daemon's Prometheus registry and the histograms the
// sampling loop feeds.
type metrics struct {
	registry     *prometheus.Registry
	sweep, write prometheus.Histogram
}

func newMetrics(d *Daemon) *metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 15) // 100 µs .. 1.6 s
	m := &metrics{
		registry: prometheus.NewRegistry(),
		sweep: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bpfperf_daemon_sweep_duration_seconds",
			Help:    "Time each tick's sweep of every program's stats took.",
			Buckets: buckets,
		}),
		write: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bpfperf_daemon_store_write_duration_seconds",
			Help:    "Time each tick's store write took.",
			Buckets: buckets,
		}),
	}
	m.registry.MustRegister(
		m.sweep, m.write, &programCollector{d: d},
		promcollectors.NewProcessCollector(promcollectors.ProcessCollectorOpts{}),
		promcollectors.NewGoCollector(),
	)
	return m
}

// observe records one tick's durations.
func (m *metrics) observe(sweep, write time.Duration) {
	m.sweep.Observe(sweep.Seconds())
	m.write.Observe(write.Seconds())
}

var (
	idLabel = []string{"id"}

	descRunTime = prometheus.NewDesc("bpfperf_program_run_time_seconds_total",
		"CPU time the program's runs took, as bpf_stats counts it (run_time_ns); a tail-call chain is charged to its entry program.", idLabel, nil)
	descRuns = prometheus.NewDesc("bpfperf_program_runs_total",
		"Runs of the program, as bpf_stats counts them (run_cnt).", idLabel, nil)
	descMisses = prometheus.NewDesc("bpfperf_program_recursion_misses_total",
		"Runs the kernel skipped because the program was already running on that CPU.", idLabel, nil)
	descSampled = prometheus.NewDesc("bpfperf_program_sampled_cpu_seconds_total",
		"CPU time the continuous profiler's samples attribute to the program, summed over its windows since bpfperfd started; tail-call targets get their own.", idLabel, nil)
	descInfo = prometheus.NewDesc("bpfperf_program_info",
		"A loaded program's metadata, 1 for each, to join on id.", []string{"id", "name", "type", "tag", "attach", "owner"}, nil)
	perRunLabels = []string{"id", "mechanism"}
	descCPUClock = prometheus.NewDesc("bpfperf_program_cpu_clock_seconds_per_run",
		"Sampled cpu-clock time per run in the program's last counter window.", perRunLabels, nil)
	descCycles = prometheus.NewDesc("bpfperf_program_cycles_per_run",
		"CPU cycles per run in the program's last counter window (needs a hardware PMU).", perRunLabels, nil)
	descInsns = prometheus.NewDesc("bpfperf_program_instructions_per_run",
		"Instructions per run in the program's last counter window (needs a hardware PMU).", perRunLabels, nil)
	descIPC = prometheus.NewDesc("bpfperf_program_instructions_per_cycle",
		"Instructions per cycle in the program's last counter window (needs a hardware PMU).", perRunLabels, nil)
	descLLC = prometheus.NewDesc("bpfperf_program_llc_misses_per_run",
		"Last-level cache misses per run in the program's last counter window (needs a hardware PMU).", perRunLabels, nil)

	descPrograms = prometheus.NewDesc("bpfperf_programs",
		"BPF programs loaded, as of the last sweep.", nil, nil)
	descOther = prometheus.NewDesc("bpfperf_programs_in_other",
		"Loaded programs beyond --web.max-programs, summed into id=\"other\".", nil, nil)
	descLost = prometheus.NewDesc("bpfperf_daemon_profile_samples_lost_total",
		"CPU samples the kernel dropped from the continuous profiler's rings.", []string{"event"}, nil)
	descWindows = prometheus.NewDesc("bpfperf_daemon_profile_windows_total",
		"Continuous profile windows finished.", nil, nil)
	descStoreBytes = prometheus.NewDesc("bpfperf_daemon_store_size_bytes",
		"Size of the store file.", nil, nil)
	descStats = prometheus.NewDesc("bpfperf_daemon_stats_info",
		"How BPF run-time stats are on: mode fd (BPF_ENABLE_STATS) or sysctl (kernel.bpf_stats_enabled).", []string{"mode"}, nil)
	descStatsCost = prometheus.NewDesc("bpfperf_bpf_stats_cost_seconds_per_run",
		"What bpf_stats adds to every program run, measured on kernel 6.18 (10 -> 55 ns for an empty program); rate(bpfperf_program_runs_total) times this is the CPU monitoring costs the programs.", nil, nil)
	descBuild = prometheus.NewDesc("bpfperf_build_info",
		"bpfperfd's version, 1.", []string{"version"}, nil)
)

// programCollector turns the sampler's current view into series.
type programCollector struct{ d *Daemon }

var _ prometheus.Collector = (*programCollector)(nil)

func (c *programCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunTime, descRuns, descMisses, descSampled, descInfo,
		descCPUClock, descCycles, descInsns, descIPC, descLLC,
		descPrograms, descOther, descLost, descWindows, descStoreBytes, descStats, descStatsCost, descBuild} {
		ch <- d
	}
}

// progSeries is what one program's series need, copied out under the
// sampler's lock.
type progSeries struct {
	id             uint32
	name, typ, tag string
	attach, owner  string
	cur            collectors.Sample
	perf           *api.PerfCounters
	sampledNs      int64
}

func (c *programCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectPrograms(ch)
	c.collectDaemon(ch)
}

// collectPrograms reports each loaded program, the first MaxPrograms by id
// on their own and the rest summed into id="other".
func (c *programCollector) collectPrograms(ch chan<- prometheus.Metric) {
	d := c.d
	progs := c.snapshot()
	sampling := c.addSampled(progs)

	limit := d.cfg.Web.MaxPrograms
	if limit <= 0 {
		limit = DefaultWebMaxPrograms
	}
	ch <- prometheus.MustNewConstMetric(descPrograms, prometheus.GaugeValue, float64(len(progs)))
	ch <- prometheus.MustNewConstMetric(descOther, prometheus.GaugeValue, float64(max(0, len(progs)-limit)))
	var other progSeries
	for i := range progs {
		p := &progs[i]
		if i >= limit {
			other.cur.RunTimeNs += p.cur.RunTimeNs
			other.cur.RunCnt += p.cur.RunCnt
			other.cur.RecursionMisses += p.cur.RecursionMisses
			other.sampledNs += p.sampledNs
			continue
		}
		id := strconv.FormatUint(uint64(p.id), 10)
		emitCounters(ch, id, p, sampling)
		ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, id, p.name, p.typ, p.tag, p.attach, p.owner)
		if pc := p.perf; pc != nil {
			for _, g := range []struct {
				desc  *prometheus.Desc
				v     *float64
				scale float64
			}{
				{descCPUClock, pc.CPUClockNsPerRun, 1e-9}, {descCycles, pc.CyclesPerRun, 1},
				{descInsns, pc.InstructionsPerRun, 1}, {descIPC, pc.IPC, 1}, {descLLC, pc.LLCMissesPerRun, 1},
			} {
				if g.v != nil {
					ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, *g.v*g.scale, id, pc.Mechanism)
				}
			}
		}
	}
	if len(progs) > limit {
		emitCounters(ch, otherID, &other, sampling)
	}
}

func emitCounters(ch chan<- prometheus.Metric, id string, p *progSeries, sampling bool) {
	ch <- prometheus.MustNewConstMetric(descRunTime, prometheus.CounterValue, float64(p.cur.RunTimeNs)/1e9, id)
	ch <- prometheus.MustNewConstMetric(descRuns, prometheus.CounterValue, float64(p.cur.RunCnt), id)
	ch <- prometheus.MustNewConstMetric(descMisses, prometheus.CounterValue, float64(p.cur.RecursionMisses), id)
	if sampling {
		ch <- prometheus.MustNewConstMetric(descSampled, prometheus.CounterValue, float64(p.sampledNs)/1e9, id)
	}
}

// snapshot copies the loaded programs out of the sampler, by id: ids grow
// with load order, so with a cap the oldest programs keep their series.
func (c *programCollector) snapshot() []progSeries {
	d := c.d
	s := d.sampler
	s.mu.RLock()
	progs := make([]progSeries, 0, len(s.progs))
	d.ctr.mu.Lock()
	for id, p := range s.progs {
		progs = append(progs, progSeries{
			id: id, name: p.meta.Name, typ: p.meta.Type, tag: p.meta.Tag,
			attach: attachLabel(p.meta.Attach), owner: ownerLabel(p.meta.Owners),
			cur: p.cur, perf: d.lastCountersLocked(id),
		})
	}
	d.ctr.mu.Unlock()
	s.mu.RUnlock()
	slices.SortFunc(progs, func(a, b progSeries) int { return cmp.Compare(a.id, b.id) })
	return progs
}

// addSampled adds each program's sampled CPU time, and says whether
// continuous profiling runs (without it there is no such series).
func (c *programCollector) addSampled(progs []progSeries) bool {
	pr := &c.d.prof
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.prof == nil || pr.cfg.Every <= 0 {
		return false
	}
	for i := range progs {
		progs[i].sampledNs = pr.cpuNs[progs[i].id]
	}
	return true
}

// collectDaemon reports the daemon's own state and cost (the process
// collector adds its CPU seconds and RSS).
func (c *programCollector) collectDaemon(ch chan<- prometheus.Metric) {
	d := c.d
	pr := &d.prof
	pr.mu.Lock()
	windows := pr.windows
	for ev, n := range pr.lost {
		ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(n), ev)
	}
	on := pr.prof != nil
	pr.mu.Unlock()
	if on {
		ch <- prometheus.MustNewConstMetric(descWindows, prometheus.CounterValue, float64(windows))
	}
	ch <- prometheus.MustNewConstMetric(descStoreBytes, prometheus.GaugeValue, float64(d.store.Size()))
	ch <- prometheus.MustNewConstMetric(descStats, prometheus.GaugeValue, 1, string(d.stats.Mode()))
	ch <- prometheus.MustNewConstMetric(descStatsCost, prometheus.GaugeValue, BPFStatsCostPerRun.Seconds())
	ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, 1, d.cfg.Version)
}

// attachLabel lists a program's attach points: "type:target", by link.
func attachLabel(points []collectors.AttachPoint) string {
	if len(points) == 0 {
		return ""
	}
	parts := make([]string, 0, len(points))
	for _, a := range points {
		parts = append(parts, strings.TrimSuffix(a.Type+":"+a.Target, ":"))
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), ",")
}

// ownerLabel lists the commands of the processes holding a program (not
// their pids, which would change the series on every restart).
func ownerLabel(owners []collectors.Owner) string {
	if len(owners) == 0 {
		return ""
	}
	parts := make([]string, 0, len(owners))
	for _, o := range owners {
		parts = append(parts, o.Comm)
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), ",")
}
