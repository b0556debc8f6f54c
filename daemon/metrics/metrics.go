// Package metrics is the daemon's Prometheus room: what /metrics serves.
// A scrape reads what the daemon's other rooms already hold (the sampler's
// programs, the profiler's windows, the counter windows), through Source:
// no kernel read of its own.
package metrics

import (
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promcollectors "github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

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

// Source is what a scrape reads. The daemon implements it over its rooms.
type Source interface {
	// Programs calls fn once with the loaded programs, under the
	// sampler's read lock: a Program's Meta is valid only until fn
	// returns.
	Programs(fn func(iter.Seq[Program]))
	// PerfCounters fills into[i] with program ids[i]'s last perf counter
	// window, nil where it has none.
	PerfCounters(ids []uint32, into []*api.PerfCounters)
	// SampledNs fills into[i] with program ids[i]'s CPU time in the
	// continuous profile windows since the daemon started, and says
	// whether continuous profiling runs (without it there is no such
	// series).
	SampledNs(ids []uint32, into []int64) bool
	// Profiler is the continuous profiler's windows and lost samples.
	Profiler() Profiler
	// State is the daemon's own state.
	State() State
	// Owners is every owner with what is charged to it now (GET
	// /v1/owners).
	Owners() []api.OwnerRow
	// Triggers is what triggered each program in the latest continuous
	// profile window, by program (costliest first) and within one,
	// costliest trigger first; nil before the first window.
	Triggers() []api.TriggerRow
	// Hooks is what each hook's machinery cost in the latest continuous
	// profile window, in CPU seconds per second (profile.hook.go names
	// them); nil before the first window.
	Hooks() map[string]float64
	// Latency is the newest latency window of each loaded program timed
	// since the daemon started (at most 50).
	Latency() []api.LatencyWindow
}

// Program is one loaded program, as a scrape needs it.
type Program struct {
	ID          uint32
	Meta        *collectors.Meta
	IdentityKey string
	Cur         collectors.Sample
}

// Profiler is the continuous profiler's figures; On is false where it
// could not start.
type Profiler struct {
	On      bool
	Windows int64
	Lost    map[string]uint64 // samples lost, by event
	// Passed and Dropped are the kernel filter's samples (zero where it
	// never ran).
	Passed, Dropped uint64
	Filtered        bool // the latest window was filtered
	// The captures' wake-ups to empty their rings (api.ProfilingDrains).
	TimedDrains, FullDrains uint64
}

// State is the daemon's own state, as its series show it.
type State struct {
	StoreBytes int64
	StatsMode  string
	// StatsCostNsPerRun is bpf_stats' cost per run measured at start, 0
	// when not measured.
	StatsCostNsPerRun float64
	// The stats' share of each interval now (1 on all the time), the
	// budget (0 without one), and what they cost the programs now at that
	// share: CPU seconds per second (nil when their cost is not measured).
	StatsDuty, StatsBudget float64
	StatsPaid              *float64
	Version                string
}

// Metrics is the daemon's Prometheus registry, the programs' families
// served beside it, and the histograms the sampling loop feeds.
type Metrics struct {
	registry     *prometheus.Registry
	programs     *programFamilies
	sweep, write prometheus.Histogram
	// findings counts the regression detector's findings since start, by
	// kind and program key, for dashboards' markers and alerts.
	findings *prometheus.CounterVec
}

// New makes the registry over src; the first maxPrograms programs by id
// get series of their own, the rest are summed into id="other".
func New(src Source, maxPrograms int) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 15) // 100 µs .. 1.6 s
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		programs: newProgramFamilies(src, maxPrograms),
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
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bpfperf_program_findings_total",
			Help: "Regressions, improvements and shifts the daemon found since it started, by program name and type (a finding spans two versions, so it has no id).",
		}, []string{"kind", "type", "name"}),
	}
	m.registry.MustRegister(
		m.sweep, m.write, m.findings, &daemonCollector{src: src}, &ownerCollector{src: src}, &triggerCollector{src: src}, &latencyCollector{src: src},
		promcollectors.NewProcessCollector(promcollectors.ProcessCollectorOpts{}),
		promcollectors.NewGoCollector(),
	)
	return m
}

// Gather is what /metrics serves: the registry's families and the
// programs'. done must be called once they are written.
func (m *Metrics) Gather() (_ []*dto.MetricFamily, done func(), _ error) {
	mfs, err := m.registry.Gather()
	progs, done := m.programs.gather()
	mfs = append(mfs, progs...)
	slices.SortFunc(mfs, byName)
	return mfs, done, err
}

var _ prometheus.TransactionalGatherer = (*Metrics)(nil)

// Observe records one tick's durations.
func (m *Metrics) Observe(sweep, write time.Duration) {
	m.sweep.Observe(sweep.Seconds())
	m.write.Observe(write.Seconds())
}

// Found counts a regression detector's finding.
func (m *Metrics) Found(kind, typ, name string) {
	m.findings.WithLabelValues(kind, typ, name).Inc()
}

var (
	descLost = prometheus.NewDesc("bpfperf_daemon_profile_samples_lost_total",
		"CPU samples the kernel dropped from the continuous profiler's rings.", []string{"event"}, nil)
	descFiltered = prometheus.NewDesc("bpfperf_daemon_profile_filter_samples_total",
		"CPU samples the kernel filter on the continuous profiler's events let through (verdict passed) or kept out as not of BPF code (dropped).", []string{"verdict"}, nil)
	descFilterOn = prometheus.NewDesc("bpfperf_daemon_profile_filter_on",
		"1 when the latest continuous window was filtered in the kernel, 0 when it was not (status says why).", nil, nil)
	descDrains = prometheus.NewDesc("bpfperf_daemon_profile_drains_total",
		"Times the continuous profiler woke before a window's end to empty its rings: on its timer (reason timed: a capture that must poll, unfiltered or beside a tracing program) or because a ring reached its watermark (reason full).", []string{"reason"}, nil)
	descWindows = prometheus.NewDesc("bpfperf_daemon_profile_windows_total",
		"Continuous profile windows finished.", nil, nil)
	descStoreBytes = prometheus.NewDesc("bpfperf_daemon_store_size_bytes",
		"Size of the store file.", nil, nil)
	descStats = prometheus.NewDesc("bpfperf_daemon_stats_info",
		"How BPF run-time stats are on: mode fd (BPF_ENABLE_STATS) or sysctl (kernel.bpf_stats_enabled).", []string{"mode"}, nil)
	descStatsCost = prometheus.NewDesc("bpfperf_bpf_stats_cost_seconds_per_run",
		"What bpf_stats adds to every program run: measured on this host at the daemon's start where nothing else kept stats on, else 45 ns (kernel 6.18, 10 -> 55 ns for an empty program); rate(bpfperf_program_runs_total) times this is the CPU monitoring costs the programs.", nil, nil)
	descStatsDuty = prometheus.NewDesc("bpfperf_bpf_stats_duty_ratio",
		"Share of the time bpf_stats are on (1: all the time, every figure exact; below, runs and run time are scaled from that share, gathered into one interval in several where switching stats takes long): --stats.duty, or what --stats.budget allows.", nil, nil)
	descStatsBudget = prometheus.NewDesc("bpfperf_bpf_stats_budget_cpu_seconds_per_second",
		"--stats.budget: the CPU seconds per second bpf_stats may cost the host's programs; absent without a budget.", nil, nil)
	descStatsPaid = prometheus.NewDesc("bpfperf_bpf_stats_cost_cpu_seconds_per_second",
		"What bpf_stats cost the host's programs over the last interval, at the share in force: runs/s times the measured cost per run times the duty.", nil, nil)
	descLinkMissed = prometheus.NewDesc("bpfperf_link_missed_total",
		"Events a kprobe, kretprobe or kprobe_multi link fired for but never ran its program on (the kernel's missed count, Linux 6.7 and later), as of the last reading of links; id is the program's.", []string{"id", "link_id"}, nil)
	descBuild = prometheus.NewDesc("bpfperf_build_info",
		"bpfperfd's version, 1.", []string{"version"}, nil)
)

// daemonCollector reports the daemon's own state; the programs' series
// are programFamilies'.
type daemonCollector struct{ src Source }

var _ prometheus.Collector = (*daemonCollector)(nil)

func (c *daemonCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLost, descFiltered, descFilterOn, descDrains, descWindows, descStoreBytes, descStats, descStatsCost, descStatsDuty, descStatsBudget, descStatsPaid, descLinkMissed, descBuild} {
		ch <- d
	}
}

func (c *daemonCollector) Collect(ch chan<- prometheus.Metric) { c.collectDaemon(ch) }

// collectDaemon reports the daemon's own state and cost (the process
// collector adds its CPU seconds and RSS).
func (c *daemonCollector) collectDaemon(ch chan<- prometheus.Metric) {
	pr := c.src.Profiler()
	for ev, n := range pr.Lost {
		ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(n), ev)
	}
	if pr.On {
		ch <- prometheus.MustNewConstMetric(descWindows, prometheus.CounterValue, float64(pr.Windows))
	}
	if pr.On && pr.Windows > 0 {
		ch <- prometheus.MustNewConstMetric(descFiltered, prometheus.CounterValue, float64(pr.Passed), "passed")
		ch <- prometheus.MustNewConstMetric(descFiltered, prometheus.CounterValue, float64(pr.Dropped), "dropped")
		on := 0.0
		if pr.Filtered {
			on = 1
		}
		ch <- prometheus.MustNewConstMetric(descFilterOn, prometheus.GaugeValue, on)
		ch <- prometheus.MustNewConstMetric(descDrains, prometheus.CounterValue, float64(pr.TimedDrains), "timed")
		ch <- prometheus.MustNewConstMetric(descDrains, prometheus.CounterValue, float64(pr.FullDrains), "full")
	}
	st := c.src.State()
	ch <- prometheus.MustNewConstMetric(descStoreBytes, prometheus.GaugeValue, float64(st.StoreBytes))
	ch <- prometheus.MustNewConstMetric(descStats, prometheus.GaugeValue, 1, st.StatsMode)
	cost := BPFStatsCostPerRun.Seconds()
	if st.StatsCostNsPerRun > 0 {
		cost = st.StatsCostNsPerRun / 1e9 // measured on this host at start
	}
	ch <- prometheus.MustNewConstMetric(descStatsCost, prometheus.GaugeValue, cost)
	ch <- prometheus.MustNewConstMetric(descStatsDuty, prometheus.GaugeValue, st.StatsDuty)
	if st.StatsBudget > 0 {
		ch <- prometheus.MustNewConstMetric(descStatsBudget, prometheus.GaugeValue, st.StatsBudget)
	}
	if st.StatsPaid != nil {
		ch <- prometheus.MustNewConstMetric(descStatsPaid, prometheus.GaugeValue, *st.StatsPaid)
	}
	for _, m := range c.linkMissed() {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, 1, st.Version)
}

// linkMissed is one counter per kprobe link whose kernel reports a missed
// count, made under the sampler's lock and sent after it.
func (c *daemonCollector) linkMissed() []prometheus.Metric {
	var out []prometheus.Metric
	c.src.Programs(func(progs iter.Seq[Program]) {
		for p := range progs {
			for _, a := range p.Meta.Attach {
				if a.Missed != nil {
					out = append(out, prometheus.MustNewConstMetric(descLinkMissed, prometheus.CounterValue, float64(*a.Missed),
						strconv.FormatUint(uint64(p.ID), 10), strconv.FormatUint(uint64(a.LinkID), 10)))
				}
			}
		}
	})
	return out
}

// attachLabel lists a program's attach points: "type:target", by link.
func attachLabel(points []collectors.AttachPoint) string {
	if len(points) == 0 {
		return ""
	}
	parts := make([]string, 0, len(points))
	for _, a := range points {
		parts = append(parts, strings.TrimSuffix(a.Type+":"+a.NetnsTarget(), ":"))
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
