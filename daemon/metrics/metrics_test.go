package metrics

import (
	"iter"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/identity"
)

// fakeSource holds the programs a test puts in it, as the daemon's
// sampler and counter windows would.
type fakeSource struct {
	progs    map[uint32]Program
	perf     map[uint32]*api.PerfCounters
	triggers []api.TriggerRow
	hooks    map[string]float64
	latency  []api.LatencyWindow
}

func newFakeSource() *fakeSource {
	return &fakeSource{progs: map[uint32]Program{}, perf: map[uint32]*api.PerfCounters{}}
}

func (f *fakeSource) Put(p Program)    { f.progs[p.ID] = p }
func (f *fakeSource) Remove(id uint32) { delete(f.progs, id) }

func (f *fakeSource) Programs(fn func(iter.Seq[Program])) {
	fn(func(yield func(Program) bool) {
		for _, p := range f.progs {
			if !yield(p) {
				return
			}
		}
	})
}

func (f *fakeSource) PerfCounters(ids []uint32, into []*api.PerfCounters) {
	for i, id := range ids {
		into[i] = f.perf[id]
	}
}

func (f *fakeSource) SampledNs([]uint32, []int64) bool { return false }
func (f *fakeSource) Profiler() Profiler               { return Profiler{} }
func (f *fakeSource) State() State                     { return State{} }
func (f *fakeSource) Owners() []api.OwnerRow           { return nil }
func (f *fakeSource) Triggers() []api.TriggerRow       { return f.triggers }
func (f *fakeSource) Hooks() map[string]float64        { return f.hooks }
func (f *fakeSource) Latency() []api.LatencyWindow     { return f.latency }

// meta is a program's metadata as a fake holds it (by pointer, as the
// sampler hands it out).
func meta(m collectors.Meta) *collectors.Meta { return &m }

// programsOnly gathers the per-program families alone, which need no
// store or stats.
type programsOnly struct{ pf *programFamilies }

func (p programsOnly) Gather() ([]*dto.MetricFamily, func(), error) {
	mfs, done := p.pf.gather()
	return mfs, done, nil
}

// count is how many series family name has in one scrape.
func (p programsOnly) count(name string) int {
	mfs, done := p.pf.gather()
	defer done()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.Metric)
		}
	}
	return 0
}

// TestMetricsCap: beyond --web.max-programs the newest programs (highest
// ids) are summed into id="other"; programs keep their info series.
func TestMetricsCap(t *testing.T) {
	f := newFakeSource()
	for id, v := range map[uint32][2]uint64{7: {1e9, 10}, 3: {2e9, 20}, 9: {3e9, 30}, 12: {4e9, 40}} {
		p := Program{
			ID: id, Meta: meta(collectors.Meta{ID: id, Name: "p", Type: "xdp", Tag: "0011223344556677",
				Attach: []collectors.AttachPoint{{Type: "xdp", Target: "ifindex 1 (lo)"}}, Owners: []collectors.Owner{{PID: 1, Comm: "agent"}, {PID: 2, Comm: "agent"}}}),
			Cur: collectors.Sample{ID: id, RunTimeNs: v[0], RunCnt: v[1]},
		}
		if id == 3 {
			p.IdentityKey = "xdp/p at xdp dev lo by agent" // settled; 7 is not yet
		}
		f.Put(p)
	}
	want := `
# HELP bpfperf_program_runs_total Runs of the program, as bpf_stats counts them (run_cnt).
# TYPE bpfperf_program_runs_total counter
bpfperf_program_runs_total{id="3"} 20
bpfperf_program_runs_total{id="7"} 10
bpfperf_program_runs_total{id="other"} 70
# HELP bpfperf_program_run_time_seconds_total CPU time the program's runs took, as bpf_stats counts it (run_time_ns); a tail-call chain is charged to its entry program.
# TYPE bpfperf_program_run_time_seconds_total counter
bpfperf_program_run_time_seconds_total{id="3"} 2
bpfperf_program_run_time_seconds_total{id="7"} 1
bpfperf_program_run_time_seconds_total{id="other"} 7
# HELP bpfperf_program_info A loaded program's metadata, 1 for each, to join on id.
# TYPE bpfperf_program_info gauge
bpfperf_program_info{attach="xdp:ifindex 1 (lo)",id="3",identity="` + identity.ShortID("xdp/p at xdp dev lo by agent") + `",name="p",owner="agent",tag="0011223344556677",type="xdp"} 1
bpfperf_program_info{attach="xdp:ifindex 1 (lo)",id="7",identity="",name="p",owner="agent",tag="0011223344556677",type="xdp"} 1
# HELP bpfperf_programs_in_other Loaded programs beyond --web.max-programs, summed into id="other".
# TYPE bpfperf_programs_in_other gauge
bpfperf_programs_in_other 2
`
	names := []string{"bpfperf_program_runs_total", "bpfperf_program_run_time_seconds_total", "bpfperf_program_info", "bpfperf_programs_in_other"}
	g := programsOnly{newProgramFamilies(f, 2)}
	// The second scrape reuses the first one's series.
	for range 2 {
		if err := testutil.TransactionalGatherAndCompare(g, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
	}
	// An unloaded program leaves the output.
	f.Remove(3)
	if n := g.count("bpfperf_program_info"); n != 2 {
		t.Errorf("after an unload: %d info series, want 2 (ids 7 and 9)", n)
	}
	if _, ok := g.pf.byID[3]; ok {
		t.Error("an unloaded program's series are still kept")
	}
}

// TestMetricsInfoChanges: a program's info series follows its metadata
// (owners come and go), and its counters follow each sweep.
func TestMetricsInfoChanges(t *testing.T) {
	f := newFakeSource()
	m := collectors.Meta{ID: 5, Name: "p", Type: "xdp", Tag: "0011223344556677", Owners: []collectors.Owner{{PID: 1, Comm: "agent"}}}
	p := Program{ID: 5, Meta: &m, Cur: collectors.Sample{ID: 5, RunTimeNs: 1e9, RunCnt: 10}}
	f.Put(p)
	g := programsOnly{newProgramFamilies(f, 2000)}
	want := func(owner string, runs int) string {
		return `
# HELP bpfperf_program_info A loaded program's metadata, 1 for each, to join on id.
# TYPE bpfperf_program_info gauge
bpfperf_program_info{attach="",id="5",identity="",name="p",owner="` + owner + `",tag="0011223344556677",type="xdp"} 1
# HELP bpfperf_program_runs_total Runs of the program, as bpf_stats counts them (run_cnt).
# TYPE bpfperf_program_runs_total counter
bpfperf_program_runs_total{id="5"} ` + strconv.Itoa(runs) + "\n"
	}
	names := []string{"bpfperf_program_info", "bpfperf_program_runs_total"}
	if err := testutil.TransactionalGatherAndCompare(g, strings.NewReader(want("agent", 10)), names...); err != nil {
		t.Error(err)
	}
	m.Owners = []collectors.Owner{{PID: 2, Comm: "agent"}, {PID: 3, Comm: "loader"}}
	p.Cur.RunCnt = 12
	f.Put(p)
	if err := testutil.TransactionalGatherAndCompare(g, strings.NewReader(want("agent,loader", 12)), names...); err != nil {
		t.Error(err)
	}
	// Its identity settled: the info series says it.
	p.IdentityKey = "xdp/p by agent"
	f.Put(p)
	settled := strings.Replace(want("agent,loader", 12), `identity=""`, `identity="`+identity.ShortID(p.IdentityKey)+`"`, 1)
	if err := testutil.TransactionalGatherAndCompare(g, strings.NewReader(settled), names...); err != nil {
		t.Error(err)
	}
}

// TestMetricsPerRun: a program's last counter window gives its per-run
// gauges, labelled with the mechanism, cpu-clock in seconds; a figure the
// window lacks (no hardware PMU) and a program without a window have no
// series.
func TestMetricsPerRun(t *testing.T) {
	f := newFakeSource()
	for _, id := range []uint32{5, 6} {
		f.Put(Program{
			ID:   id,
			Meta: meta(collectors.Meta{ID: id, Name: "p", Type: "xdp", Tag: "0011223344556677"}),
			Cur:  collectors.Sample{ID: id, RunTimeNs: 1e9, RunCnt: 10},
		})
	}
	clock, cycles := 1500.0, 3000.0
	f.perf[5] = &api.PerfCounters{Mechanism: api.MechanismExact, CPUClockNsPerRun: &clock, CyclesPerRun: &cycles}
	want := `
# HELP bpfperf_program_cpu_clock_seconds_per_run Sampled cpu-clock time per run in the program's last counter window.
# TYPE bpfperf_program_cpu_clock_seconds_per_run gauge
bpfperf_program_cpu_clock_seconds_per_run{id="5",mechanism="exact"} 1.5e-06
# HELP bpfperf_program_cycles_per_run CPU cycles per run in the program's last counter window (needs a hardware PMU).
# TYPE bpfperf_program_cycles_per_run gauge
bpfperf_program_cycles_per_run{id="5",mechanism="exact"} 3000
`
	names := []string{"bpfperf_program_cpu_clock_seconds_per_run", "bpfperf_program_cycles_per_run",
		"bpfperf_program_instructions_per_run", "bpfperf_program_instructions_per_cycle", "bpfperf_program_llc_misses_per_run"}
	if err := testutil.TransactionalGatherAndCompare(programsOnly{newProgramFamilies(f, 2000)}, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
