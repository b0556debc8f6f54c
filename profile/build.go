package profile

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"

	"github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/kernelbtf"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// Label keys Build puts on samples. All are string labels: numeric labels
// equal to 0 (cpu 0, pid 0 of the idle task) vanish on a round trip.
const (
	LabelProgID   = "prog_id"
	LabelProgName = "prog_name"
	LabelProgTag  = "prog_tag"
	LabelPID      = "pid"
	LabelComm     = "comm"
	LabelCPU      = "cpu"
)

// Mapping names in built profiles.
const (
	MappingBPF    = "[bpf]"
	MappingKernel = "[kernel.kallsyms]"
)

// BuildOptions tune Build.
type BuildOptions struct {
	// All keeps every sample taken in the kernel. By default Build keeps
	// only the samples with a BPF frame in their stack, and those in a
	// hook's machinery around one (LabelHook): the profile then says where
	// BPF programs and their hooks spend their time.
	All bool
	// Threads, if set, keeps only the samples of these threads (by
	// kernel thread id): a benchmark's profile is of the threads that ran
	// it, not of whatever else ran on the CPUs sampled.
	Threads []uint32
	// Cgroups, if set, names the cgroup ids samples carry (LabelCgroup);
	// without it they are labelled "id <n>".
	Cgroups CgroupResolver
}

// Build symbolizes a capture into a pprof profile with the sample types
// samples/count and cpu/nanoseconds (cycles/count for Cycles, and so on for
// the other hardware events), the
// mappings [bpf] and [kernel.kallsyms], and on each sample the labels
// prog_id, prog_name and prog_tag of the innermost BPF frame's program (a
// tail call's target, not the entry program), pid, comm and cpu, and who
// triggered the run: context, and cgroup in task context (trigger.go).
// Samples in a hook's machinery around a program are kept too, labelled
// hook (hook.go). A program
// the symbolizer never learned is known by its kallsyms name only: its
// samples get prog_tag and prog_name (its function's) but no prog_id. The
// profile passes CheckValid.
func Build(c *Capture, sym *Symbolizer, opts BuildOptions) (*profile.Profile, error) {
	// cpu-clock samples stand for nanoseconds of CPU; hardware events for
	// counts of the event, each sample its own period.
	unit := "cpu"
	if c.Event != perfevent.CPUClock {
		unit = c.Event.String()
	}
	valueType := &profile.ValueType{Type: unit, Unit: c.Event.Unit()}
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "samples", Unit: "count"}, valueType},
		DefaultSampleType: unit,
		PeriodType:        &profile.ValueType{Type: valueType.Type, Unit: valueType.Unit},
		Period:            int64(c.Period),
		TimeNanos:         c.Start.UnixNano(),
		DurationNanos:     int64(c.Duration),
	}
	if c.Event != perfevent.CPUClock {
		p.Period = 0 // the kernel varies it to keep Hz
	}
	// A multiplexed event sampled only while it was on the PMU: its values
	// stand for the whole window once scaled by time enabled / running, as
	// perf stat scales counts.
	scale := 1.0
	if c.RunningShare > 0 && c.RunningShare < 1 {
		scale = 1 / c.RunningShare
	}
	bpfMap := &profile.Mapping{ID: 1, File: MappingBPF, HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	kernMap := &profile.Mapping{ID: 2, File: MappingKernel, HasFunctions: true}
	p.Mapping = []*profile.Mapping{bpfMap, kernMap}

	b := builder{
		p: p, sym: sym, bpf: bpfMap, kernel: kernMap,
		locs:    map[locKey]*location{},
		funcs:   map[funcKey]*profile.Function{},
		stacks:  map[*uint64]*stackInfo{},
		samples: map[sampleKey]*profile.Sample{},
		cpus:    map[uint32]string{},
		pids:    map[uint32]string{},
		cgroups: map[uint64]string{},
		opts:    opts,
	}
	exact := !sym.overlaps()
	var bpfSamples, userSamples, otherSamples int
	for i := range c.Samples {
		s := &c.Samples[i]
		if opts.Threads != nil && !slices.Contains(opts.Threads, s.TID) {
			otherSamples++
			continue
		}
		if len(s.Stack) == 0 {
			userSamples++
			continue
		}
		st := b.stack(s, exact)
		if st.bpf {
			bpfSamples++
		} else if !opts.All && st.hook == "" {
			continue
		}
		b.add(s, st, scale)
	}
	p.Comments = []string{fmt.Sprintf("bpfperf: %s at %d Hz on %d CPUs; %d samples, %d with BPF frames, %d in user mode, %d lost, %d throttled",
		c.Event, c.Hz, c.CPUs, len(c.Samples), bpfSamples, userSamples, c.Lost, c.Throttled)}
	if c.Filter.On {
		// The counts above are of the samples that passed: the filter
		// dropped those in user mode and in other kernel code unwritten.
		p.Comments = append(p.Comments, fmt.Sprintf("bpfperf: filtered in the kernel: %d samples passed, %d dropped as not of BPF code", c.Filter.Passed, c.Filter.Dropped))
	}
	if opts.Threads != nil {
		p.Comments = append(p.Comments, fmt.Sprintf("bpfperf: threads %v only: %d samples of other threads left out", opts.Threads, otherSamples))
	}
	if scale != 1 {
		p.Comments = append(p.Comments, fmt.Sprintf("bpfperf: multiplexed: %s was on the PMU %.0f%% of the window; values scaled by %.3g", c.Event, 100*c.RunningShare, scale))
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("build profile: %w", err)
	}
	return p, nil
}

type builder struct {
	p            *profile.Profile
	sym          *Symbolizer
	bpf, kernel  *profile.Mapping
	locs         map[locKey]*location
	funcs        map[funcKey]*profile.Function
	stacks       map[*uint64]*stackInfo
	samples      map[sampleKey]*profile.Sample
	cpus, pids   map[uint32]string
	cgroups      map[uint64]string // cgroup id to LabelCgroup
	opts         BuildOptions
	nextStackKey int
}

type locKey struct {
	addr uint64
	leaf bool
	prog uint32
}

type location struct {
	loc   *profile.Location
	frame Frame
}

type funcKey struct{ name, systemName, file string }

// stackInfo is a symbolized stack: its locations, the program of its
// innermost BPF frame, and the context that frame ran in (LabelContext).
type stackInfo struct {
	key     int
	locs    []*profile.Location
	bpf     bool
	prog    *Frame
	context string
	hook    string // LabelHook, on stacks without BPF frames (hook.go)
}

type sampleKey struct {
	stack    int
	pid, cpu uint32
	comm     string
	cgroup   uint64
}

// stack symbolizes s.Stack. Stacks are shared between samples, so unless
// JIT addresses were reused (a sample's time then decides the program)
// each is symbolized once.
func (b *builder) stack(s *Sample, exact bool) *stackInfo {
	if exact {
		if st, ok := b.stacks[&s.Stack[0]]; ok && len(st.locs) == len(s.Stack) {
			return st
		}
	}
	b.nextStackKey++
	st := &stackInfo{key: b.nextStackKey, locs: make([]*profile.Location, len(s.Stack))}
	outermostIsBPF := false
	funcs := make([]string, len(s.Stack))
	innermostBPF := -1
	for i, a := range s.Stack {
		l := b.location(a, i == 0, s.Time)
		st.locs[i] = l.loc
		funcs[i] = l.frame.Func
		outermostIsBPF = l.frame.BPF()
		if l.frame.BPF() {
			if !st.bpf {
				innermostBPF = i
			}
			st.bpf = true
			st.context = "" // the context around the innermost program's frame
			if st.prog == nil && (l.frame.ProgID != 0 || l.frame.ProgTag != "") {
				st.prog = &l.frame
			}
		} else if st.context == "" {
			st.context = frameContext(l.frame.Func)
		}
	}
	switch {
	case !st.bpf:
		st.hook = hookOf(funcs)
	case st.prog == nil:
		st.hook = trampolineHookOf(funcs, innermostBPF, kernelbtf.FuncName)
	}
	switch {
	case st.context != "":
	case outermostIsBPF:
		// The unwinder stopped at the program (a sample in its prologue,
		// before its frame is set up): nothing says who called it.
		st.context = ContextUnknown
	default:
		st.context = ContextTask
	}
	if exact {
		b.stacks[&s.Stack[0]] = st
	}
	return st
}

func (b *builder) location(addr uint64, leaf bool, t uint64) *location {
	q := addr
	if !leaf {
		q-- // a return address: the call is the instruction before it
	}
	f := b.sym.Lookup(q, t)
	k := locKey{addr: addr, leaf: leaf, prog: f.ProgID}
	if l, ok := b.locs[k]; ok {
		return l
	}
	loc := &profile.Location{ID: uint64(len(b.p.Location) + 1), Address: addr, Mapping: b.kernel}
	if f.BPF() {
		loc.Mapping = b.bpf
	}
	m := loc.Mapping
	if m.Limit == 0 || addr < m.Start {
		m.Start = addr
	}
	m.Limit = max(m.Limit, addr+1)
	if f.Func != "" {
		loc.Line = []profile.Line{{Function: b.function(f), Line: f.Line}}
	}
	b.p.Location = append(b.p.Location, loc)
	l := &location{loc: loc, frame: f}
	b.locs[k] = l
	return l
}

func (b *builder) function(f Frame) *profile.Function {
	file := f.File
	if file != "" {
		file = path.Clean(file)
	}
	k := funcKey{f.Func, f.SystemName, file}
	if fn, ok := b.funcs[k]; ok {
		return fn
	}
	fn := &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: f.Func, SystemName: f.SystemName, Filename: file}
	if fn.SystemName == "" {
		fn.SystemName = f.Func
	}
	if file != "" {
		if start, ok := b.sym.funcStart(f); ok {
			fn.StartLine = start
		}
	}
	b.p.Function = append(b.p.Function, fn)
	b.funcs[k] = fn
	return fn
}

func (b *builder) add(s *Sample, st *stackInfo, scale float64) {
	v := int64(s.Period)
	if scale != 1 {
		v = int64(math.Round(float64(s.Period) * scale))
	}
	cgroup := s.Cgroup
	if st.context != ContextTask && st.context != ContextUnknown {
		cgroup = 0 // an interrupt's work is not the interrupted task's
	}
	k := sampleKey{stack: st.key, pid: s.PID, cpu: s.CPU, comm: s.Comm, cgroup: cgroup}
	if ps, ok := b.samples[k]; ok {
		ps.Value[0]++
		ps.Value[1] += v
		return
	}
	ps := &profile.Sample{
		Location: st.locs,
		Value:    []int64{1, v},
		Label: map[string][]string{
			LabelPID:     {itoa(b.pids, s.PID)},
			LabelComm:    {s.Comm},
			LabelCPU:     {itoa(b.cpus, s.CPU)},
			LabelContext: {st.context},
		},
	}
	if l := b.cgroupLabel(cgroup); l != "" {
		ps.Label[LabelCgroup] = []string{l}
	}
	if st.hook != "" {
		ps.Label[LabelHook] = []string{st.hook}
	}
	if st.prog != nil {
		if st.prog.ProgID != 0 {
			ps.Label[LabelProgID] = []string{strconv.FormatUint(uint64(st.prog.ProgID), 10)}
		}
		ps.Label[LabelProgName] = []string{st.prog.ProgName}
		ps.Label[LabelProgTag] = []string{st.prog.ProgTag}
	}
	b.p.Sample = append(b.p.Sample, ps)
	b.samples[k] = ps
}

func itoa(cache map[uint32]string, n uint32) string {
	s, ok := cache[n]
	if !ok {
		s = strconv.FormatUint(uint64(n), 10)
		cache[n] = s
	}
	return s
}
