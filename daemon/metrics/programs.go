package metrics

import (
	"cmp"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/identity"
)

// The programs' series, about five per program, are most of a scrape. As
// const metrics, client_golang built, label-sorted, hashed and sorted
// ~5,000 of them per scrape (10.7 ms of CPU with 1,000 programs); here
// they are client_model's structs, built when a program appears (or its
// metadata changes), kept by id, and only their values set per scrape, in
// id order. promhttp still negotiates, encodes and compresses them.

// family is one per-program metric family.
type family struct {
	name, help string
	typ        dto.MetricType
}

// The per-program families, in the order a program's series are kept.
const (
	famRunTime = iota
	famRuns
	famMisses
	famSampled
	famInfo
	famCPUClock
	famCycles
	famInsns
	famIPC
	famLLC
	famPrograms
	famOther
	nFamilies
	nCounters = famSampled + 1           // counters, labelled id; "other" has them too
	nPerRun   = famLLC - famCPUClock + 1 // gauges, labelled id and mechanism
)

var families = [nFamilies]family{
	famRunTime: {"bpfperf_program_run_time_seconds_total",
		"CPU time the program's runs took, as bpf_stats counts it (run_time_ns); a tail-call chain is charged to its entry program.", dto.MetricType_COUNTER},
	famRuns: {"bpfperf_program_runs_total",
		"Runs of the program, as bpf_stats counts them (run_cnt).", dto.MetricType_COUNTER},
	famMisses: {"bpfperf_program_recursion_misses_total",
		"Runs the kernel skipped because the program was already running on that CPU.", dto.MetricType_COUNTER},
	famSampled: {"bpfperf_program_sampled_cpu_seconds_total",
		"CPU time the continuous profiler's samples attribute to the program, summed over its windows since bpfperfd started; tail-call targets get their own.", dto.MetricType_COUNTER},
	famInfo: {"bpfperf_program_info",
		"A loaded program's metadata, 1 for each, to join on id.", dto.MetricType_GAUGE},
	famCPUClock: {"bpfperf_program_cpu_clock_seconds_per_run",
		"Sampled cpu-clock time per run in the program's last counter window.", dto.MetricType_GAUGE},
	famCycles: {"bpfperf_program_cycles_per_run",
		"CPU cycles per run in the program's last counter window (needs a hardware PMU).", dto.MetricType_GAUGE},
	famInsns: {"bpfperf_program_instructions_per_run",
		"Instructions per run in the program's last counter window (needs a hardware PMU).", dto.MetricType_GAUGE},
	famIPC: {"bpfperf_program_instructions_per_cycle",
		"Instructions per cycle in the program's last counter window (needs a hardware PMU).", dto.MetricType_GAUGE},
	famLLC: {"bpfperf_program_llc_misses_per_run",
		"Last-level cache misses per run in the program's last counter window (needs a hardware PMU).", dto.MetricType_GAUGE},
	famPrograms: {"bpfperf_programs",
		"BPF programs loaded, as of the last sweep.", dto.MetricType_GAUGE},
	famOther: {"bpfperf_programs_in_other",
		"Loaded programs beyond --web.max-programs, summed into id=\"other\".", dto.MetricType_GAUGE},
}

// programFamilies serves the per-program families. Its mutex is held from
// gather until the scrape's done, since promhttp encodes the families after
// gather returns: concurrent scrapes take turns.
type programFamilies struct {
	src   Source
	limit int // programs with series of their own
	mu    sync.Mutex
	// fams are the families gather returns, their Metric slices refilled
	// per scrape.
	fams  [nFamilies]*dto.MetricFamily
	byID  map[uint32]*programSeries
	other *programSeries
	// count and inOther are the values of bpfperf_programs and
	// bpfperf_programs_in_other.
	count, inOther *dto.Metric
	progs          []progSeries // the snapshot, reused
	gen            uint64       // scrape number, to drop unloaded programs
	out            []*dto.MetricFamily
	// The snapshot's ids, their counter windows and sampled CPU, reused.
	ids     []uint32
	perf    []*api.PerfCounters
	sampled []int64
}

// programSeries is one program's series, built once: a scrape sets the
// values their pointers share.
type programSeries struct {
	gen      uint64
	counters [nCounters]*dto.Metric
	info     *dto.Metric
	perRun   [nPerRun]*dto.Metric
	mech     *dto.LabelPair // the per-run series' mechanism label
	// What the info labels were made of, to rebuild them when it changes.
	attach []collectors.AttachPoint
	owners []collectors.Owner
	pod    collectors.Pod // the zero Pod for none
	labels [6]string      // name, type, tag, attach, owner, identity
}

func newProgramFamilies(src Source, limit int) *programFamilies {
	pf := &programFamilies{src: src, limit: limit, byID: map[uint32]*programSeries{}, other: newProgramSeries(otherID)}
	for i, f := range families {
		pf.fams[i] = &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: f.typ.Enum()}
	}
	pf.count, pf.inOther = gauge(nil), gauge(nil)
	return pf
}

func label(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

func gauge(labels []*dto.LabelPair) *dto.Metric {
	return &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: new(float64)}}
}

func newProgramSeries(id string) *programSeries {
	ps := &programSeries{mech: label("mechanism", "")}
	idLabel := []*dto.LabelPair{label("id", id)}
	for i := range ps.counters {
		ps.counters[i] = &dto.Metric{Label: idLabel, Counter: &dto.Counter{Value: new(float64)}}
	}
	for i := range ps.perRun {
		ps.perRun[i] = gauge([]*dto.LabelPair{idLabel[0], ps.mech})
	}
	ps.info = gauge(nil)
	*ps.info.Gauge.Value = 1
	return ps
}

// setInfo rebuilds the info series' labels if the program's metadata
// changed (label names sorted, as the registry would). Called with the
// sampler's lock held: meta is the sampler's.
func (ps *programSeries) setInfo(m *collectors.Meta, identID string) {
	var pod collectors.Pod
	if p := m.RunPod(); p != nil {
		pod = *p
	}
	if ps.info.Label != nil && ps.labels[0] == m.Name && ps.labels[1] == m.Type && ps.labels[2] == m.Tag && ps.labels[5] == identID &&
		slices.EqualFunc(ps.attach, m.Attach, collectors.AttachPoint.SameLink) && slices.Equal(ps.owners, m.Owners) && ps.pod == pod {
		return
	}
	id := ps.counters[0].Label[0].GetValue()
	ps.attach, ps.owners, ps.pod = slices.Clone(m.Attach), slices.Clone(m.Owners), pod
	ps.labels = [6]string{m.Name, m.Type, m.Tag, attachLabel(m.Attach), ownerLabel(m.Owners), identID}
	// identity is the identity's short id, to follow a program across
	// reloads (its id changes; this does not); empty (as good as absent
	// to Prometheus) until it is settled.
	ps.info.Label = []*dto.LabelPair{
		label("attach", ps.labels[3]), label("id", id), label("identity", identID), label("name", ps.labels[0]),
		label("owner", ps.labels[4]), label("tag", ps.labels[2]), label("type", ps.labels[1]),
	}
	if pod.Pod != "" {
		// The pod that runs it: one value each per program, so they add
		// no series; absent (as good as empty) where none does.
		ps.info.Label = append(ps.info.Label, label("container", pod.Container), label("namespace", pod.Namespace),
			label("pod", pod.Pod), label("workload", pod.Workload))
		slices.SortFunc(ps.info.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	}
}

func (ps *programSeries) setCounters(p *progSeries) {
	*ps.counters[famRunTime].Counter.Value = float64(p.cur.RunTimeNs) / 1e9
	*ps.counters[famRuns].Counter.Value = float64(p.cur.RunCnt)
	*ps.counters[famMisses].Counter.Value = float64(p.cur.RecursionMisses)
	*ps.counters[famSampled].Counter.Value = float64(p.sampledNs) / 1e9
}

// progSeries is what one program's series need, copied out under the
// sampler's lock; series is nil for programs beyond the cap.
type progSeries struct {
	id        uint32
	meta      *collectors.Meta // valid only under the sampler's lock
	identKey  string
	series    *programSeries
	cur       collectors.Sample
	perf      *api.PerfCounters
	sampledNs int64
}

// gather returns the per-program families, the first MaxPrograms programs
// by id on their own and the rest summed into id="other". Call done once
// they are written.
func (pf *programFamilies) gather() (_ []*dto.MetricFamily, done func()) {
	pf.mu.Lock()
	limit := pf.limit
	pf.gen++
	pf.snapshot(limit)
	sampling := pf.addSampled()
	for _, f := range pf.fams {
		f.Metric = f.Metric[:0]
	}
	var other progSeries
	for i := range pf.progs {
		p := &pf.progs[i]
		if i >= limit {
			other.cur.RunTimeNs += p.cur.RunTimeNs
			other.cur.RunCnt += p.cur.RunCnt
			other.cur.RecursionMisses += p.cur.RecursionMisses
			other.sampledNs += p.sampledNs
			continue
		}
		ps := p.series
		ps.setCounters(p)
		pf.addCounters(ps, sampling)
		pf.fams[famInfo].Metric = append(pf.fams[famInfo].Metric, ps.info)
		if pc := p.perf; pc != nil {
			*ps.mech.Value = pc.Mechanism
			for i, v := range [nPerRun]*float64{pc.CPUClockNsPerRun, pc.CyclesPerRun, pc.InstructionsPerRun, pc.IPC, pc.LLCMissesPerRun} {
				if v == nil {
					continue
				}
				m := ps.perRun[i]
				*m.Gauge.Value = *v
				if i == famCPUClock-famCPUClock {
					*m.Gauge.Value *= 1e-9
				}
				pf.fams[famCPUClock+i].Metric = append(pf.fams[famCPUClock+i].Metric, m)
			}
		}
	}
	if len(pf.progs) > limit {
		pf.other.setCounters(&other)
		pf.addCounters(pf.other, sampling)
	}
	for id, ps := range pf.byID {
		if ps.gen != pf.gen {
			delete(pf.byID, id) // unloaded, or beyond the cap
		}
	}
	*pf.count.Gauge.Value = float64(len(pf.progs))
	*pf.inOther.Gauge.Value = float64(max(0, len(pf.progs)-limit))
	pf.fams[famPrograms].Metric = append(pf.fams[famPrograms].Metric, pf.count)
	pf.fams[famOther].Metric = append(pf.fams[famOther].Metric, pf.inOther)

	// A family without series is left out, and the rest sorted by name, as
	// the registry does.
	pf.out = pf.out[:0]
	for _, f := range pf.fams {
		if len(f.Metric) > 0 {
			pf.out = append(pf.out, f)
		}
	}
	slices.SortFunc(pf.out, byName)
	return pf.out, pf.mu.Unlock
}

func byName(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) }

func (pf *programFamilies) addCounters(ps *programSeries, sampling bool) {
	n := nCounters
	if !sampling {
		n = famSampled // without continuous profiling there is no sampled series
	}
	for i := range n {
		pf.fams[i].Metric = append(pf.fams[i].Metric, ps.counters[i])
	}
}

// snapshot copies the loaded programs out of the sampler, by id, and
// brings the series of the first limit up to date: ids grow with load
// order, so with a cap the oldest programs keep their series.
func (pf *programFamilies) snapshot(limit int) {
	pf.src.Programs(func(progs iter.Seq[Program]) {
		pf.progs = pf.progs[:0]
		for p := range progs {
			pf.progs = append(pf.progs, progSeries{id: p.ID, meta: p.Meta, identKey: p.IdentityKey, cur: p.Cur})
		}
		slices.SortFunc(pf.progs, func(a, b progSeries) int { return cmp.Compare(a.id, b.id) })
		for i := range pf.progs[:min(limit, len(pf.progs))] {
			p := &pf.progs[i]
			ps := pf.byID[p.id]
			if ps == nil {
				ps = newProgramSeries(strconv.FormatUint(uint64(p.id), 10))
				pf.byID[p.id] = ps
			}
			ps.gen = pf.gen
			ps.setInfo(p.meta, identity.ShortID(p.identKey))
			p.series, p.meta = ps, nil
		}
	})
	pf.ids, pf.perf = pf.ids[:0], pf.perf[:0]
	for i := range pf.progs {
		pf.ids = append(pf.ids, pf.progs[i].id)
		pf.perf = append(pf.perf, nil)
	}
	pf.src.PerfCounters(pf.ids, pf.perf)
	for i := range pf.progs {
		pf.progs[i].perf = pf.perf[i]
	}
}

// addSampled adds each program's sampled CPU time, and says whether
// continuous profiling runs (without it there is no such series).
func (pf *programFamilies) addSampled() bool {
	pf.sampled = pf.sampled[:0]
	for range pf.progs {
		pf.sampled = append(pf.sampled, 0)
	}
	if !pf.src.SampledNs(pf.ids, pf.sampled) {
		return false
	}
	for i := range pf.progs {
		pf.progs[i].sampledNs = pf.sampled[i]
	}
	return true
}
