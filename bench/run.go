package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Report is the outcome of one bench run: what ran, where, and how long it
// took.
type Report struct {
	Time        time.Time    `json:"time"`
	Fingerprint Fingerprint  `json:"fingerprint"`
	Config      ReportConfig `json:"config"`
	// WallSeconds is how long the whole run took, set-up included.
	WallSeconds float64  `json:"wall_seconds"`
	Results     []Result `json:"results"`
	// Macro is set on a report of `bpfperf stat` (macro.go).
	Macro *MacroRun `json:"macro,omitempty"`
}

// ReportConfig is the part of Config a report records.
type ReportConfig struct {
	Repeat    int     `json:"repeat"` // 0: calibrated per test
	TargetMS  float64 `json:"target_ms,omitempty"`
	Measures  int     `json:"measures"`
	Warmup    bool    `json:"warmup"`
	CPUs      []int   `json:"cpus,omitempty"`
	Filter    string  `json:"filter,omitempty"`
	Quick     bool    `json:"quick,omitempty"`
	WithStats bool    `json:"with_stats"`
	// Events are the events counted per run (bpfperf bench --counters).
	Events []string `json:"events,omitempty"`
	// Unsupported are events asked for that this machine's PMU does not
	// count, with why ("not supported by this PMU (ENOENT)"): no figure.
	Unsupported map[string]string `json:"unsupported,omitempty"`
}

// Result is one test's measurements.
type Result struct {
	Test
	// Repeat is the number of runs behind each measurement.
	Repeat int `json:"repeat,omitempty"`
	// Runs has one entry per CPU the test ran on (one unless parallel).
	Runs []CPURun `json:"runs,omitempty"`
	// Summary is over all measurements of all runs.
	Summary Summary `json:"summary"`
	// Skipped says why the test could not run here (e.g. no test run for
	// its program type). It is not a failure.
	Skipped string `json:"skipped,omitempty"`
	// Error is a failure: the test should have run and did not.
	Error string `json:"error,omitempty"`
	// Events summarizes each counted event per run over all measurements
	// (Config.Events): gross, the test-run loop's own work included.
	Events map[string]Summary `json:"events,omitempty"`
	// EventsNet is each event's median per run less that of the empty
	// program of the same hook (baseline/TYPE) in the same report, when it
	// ran: what the program itself costs.
	EventsNet map[string]float64 `json:"events_net,omitempty"`
	// Macro holds a program's figures in a report of `bpfperf stat`.
	Macro *MacroResult `json:"macro,omitempty"`

	progType ebpf.ProgramType // of the program run; set once it ran
}

// EventMeasurements returns all per-run values of one event, every CPU's
// in turn.
func (r Result) EventMeasurements(event string) []float64 {
	var all []float64
	for _, run := range r.Runs {
		all = append(all, run.Events[event]...)
	}
	return all
}

// IPC is instructions per cycle from the medians, when both were counted.
func (r Result) IPC() (float64, bool) {
	cy, okc := r.Events[perfevent.Cycles.String()]
	in, oki := r.Events[perfevent.Instructions.String()]
	if !okc || !oki || cy.Median <= 0 {
		return 0, false
	}
	return in.Median / cy.Median, true
}

// CPURun is the series measured on one CPU. CPU is -1 when unpinned.
type CPURun struct {
	CPU          int       `json:"cpu"`
	Measurements []float64 `json:"measurements_ns"`
	Summary      Summary   `json:"summary"`
	// Events are the counted events per run, one value per measurement,
	// by event name (Config.Events).
	Events map[string][]float64 `json:"events_per_run,omitempty"`
}

// Measurements returns all measurements of r, every CPU's in turn.
func (r Result) Measurements() []float64 {
	var all []float64
	for _, run := range r.Runs {
		all = append(all, run.Measurements...)
	}
	return all
}

// Options are the side effects of a run, passed in.
type Options struct {
	// WithStats turns bpf_stats on for the run (BPF_ENABLE_STATS fd held
	// until the run ends). Without it the runner turns nothing on, and
	// reports whether somebody else had stats counting.
	WithStats bool
	Env       Env
	// Progress, if set, sees each result as it is done.
	Progress func(Result)
	// Measuring, if set, is called for each test just before its
	// measurements start (after its set-up, calibration and warm-up, with
	// every CPU of a parallel run warm) with the ids of the threads that
	// take them, one per CPU, and the function it returns just after the
	// last one ends, with their error (nil when all went well): how
	// bpfperf bench --profile samples those spans and threads alone. A
	// test that fails or is skipped before then gets no call.
	Measuring func(t Test, threads []uint32) (done func(error))
}

// Select returns the tests cfg keeps, in suite order.
func Select(tests []Test, cfg Config) []Test {
	var out []Test
	for _, t := range tests {
		if cfg.Quick && !t.Quick {
			continue
		}
		if cfg.Filter != nil && !cfg.Filter.MatchString(t.Name) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// Run runs tests (already selected) and reports. A failed test is recorded
// in its Result and the run goes on; Run's error is for the run as a whole,
// and Failed tells whether any test failed.
func Run(ctx context.Context, tests []Test, cfg Config, opts Options) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock rlimit: %w", err)
	}
	start := time.Now()
	rep := &Report{
		Time:        start.UTC(),
		Fingerprint: opts.Env.Fingerprint(),
		Config: ReportConfig{
			Repeat: cfg.Repeat, Measures: cfg.Measures, Warmup: cfg.Warmup,
			CPUs: cfg.CPUs, Quick: cfg.Quick, WithStats: opts.WithStats,
		},
	}
	for _, e := range cfg.Events {
		rep.Config.Events = append(rep.Config.Events, e.String())
	}
	for e, err := range cfg.Unsupported {
		if rep.Config.Unsupported == nil {
			rep.Config.Unsupported = make(map[string]string)
		}
		rep.Config.Unsupported[e.String()] = eventSummary(err)
	}
	if cfg.Repeat == 0 {
		rep.Config.TargetMS = float64(cfg.Target) / float64(time.Millisecond)
	}
	if cfg.Filter != nil {
		rep.Config.Filter = cfg.Filter.String()
	}

	if opts.WithStats {
		// unix.BPF_STATS_RUN_TIME is 0.
		closer, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			return nil, fmt.Errorf("enable bpf stats: %w", err)
		}
		defer closer.Close()
	}
	before, err := statsCounting()
	if err != nil {
		return nil, fmt.Errorf("probe bpf stats: %w", err)
	}

	var cur *fixture
	var state any
	var closeState func()
	var stateErr error
	release := func() {
		if closeState != nil {
			closeState()
		}
		cur, state, closeState, stateErr = nil, nil, nil, nil
	}
	defer release()

	for _, t := range tests {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if t.fixture != cur {
			release()
			cur = t.fixture
			if cur != nil {
				state, closeState, stateErr = cur.open()
			}
		}
		res := Result{Test: t}
		if stateErr != nil {
			res.Error = stateErr.Error()
		} else {
			runTest(&res, t, state, cfg, opts.Measuring)
		}
		rep.Results = append(rep.Results, res)
		if opts.Progress != nil {
			opts.Progress(res)
		}
	}
	release()
	netOfHarness(rep.Results)

	after, err := statsCounting()
	if err != nil {
		return nil, fmt.Errorf("probe bpf stats: %w", err)
	}
	rep.Fingerprint.Stats = statsMode(opts.WithStats, before, after, opts.Env)
	rep.WallSeconds = time.Since(start).Seconds()
	return rep, nil
}

func runTest(res *Result, t Test, state any, cfg Config, measuring func(Test, []uint32) func(error)) {
	c, err := t.prepare(state)
	if err == nil {
		if c.close != nil {
			defer c.close()
		}
		var span func([]uint32) func(error)
		if measuring != nil {
			span = func(threads []uint32) func(error) { return measuring(t, threads) }
		}
		res.Repeat, res.Runs, err = measure(c, cfg, span)
	}
	switch {
	case errors.Is(err, ErrNoTestRun):
		res.Skipped = err.Error()
		res.Runs = nil
	case err != nil:
		res.Error = err.Error()
		res.Runs = nil
	default:
		res.Summary = Summarize(res.Measurements())
		res.progType = c.Program.Type()
		for _, e := range cfg.Events {
			if res.Events == nil {
				res.Events = map[string]Summary{}
			}
			res.Events[e.String()] = Summarize(res.EventMeasurements(e.String()))
		}
	}
}

// netOfHarness fills EventsNet: each event's median per run less that of
// the empty program of the same hook (its baseline/TYPE test), where the
// report has one. BPF_PROG_TEST_RUN's loop does work for every run (set
// up the context, call the program, keep time) that the counters see as
// the program's; the empty program of the same hook shows how much.
func netOfHarness(results []Result) {
	baselines := map[ebpf.ProgramType]*Result{}
	for i, r := range results {
		if r.Events != nil && r.Name == "baseline/"+typeName(r.progType) {
			baselines[r.progType] = &results[i]
		}
	}
	for i := range results {
		r := &results[i]
		base := baselines[r.progType]
		if base == nil || r.Events == nil {
			continue
		}
		r.EventsNet = map[string]float64{}
		for e, s := range r.Events {
			if b, ok := base.Events[e]; ok {
				r.EventsNet[e] = s.Median - b.Median
			}
		}
	}
}

func statsMode(withStats, before, after bool, env Env) StatsMode {
	m := StatsMode{Counting: before || after, Changed: before != after, Source: "off"}
	switch {
	case withStats:
		m.Source = "--with-stats"
	case m.Counting && readTrim(env.proc("sys/kernel/bpf_stats_enabled")) == "1":
		m.Source = "sysctl kernel.bpf_stats_enabled=1"
	case m.Counting:
		m.Source = "another process holds a BPF_ENABLE_STATS fd"
	}
	return m
}

// Failed reports whether any test in the report failed (skips are not
// failures).
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Error != "" {
			return true
		}
	}
	return false
}

// eventSummary is why an event was not counted, without the event and
// thread: "not supported by this PMU (ENOENT)".
func eventSummary(err error) string {
	if oe, ok := errors.AsType[*perfevent.OpenError](err); ok {
		return oe.Summary()
	}
	return err.Error()
}
