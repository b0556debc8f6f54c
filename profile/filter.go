package profile

import (
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/transientfd"

	"github.com/bpfperf/bpfperf/profile/kfilter"
)

// KernelFilter keeps samples that cannot be of BPF code out of the
// sampling events' rings, in the kernel: profile/kfilter's Filter.
// Behind an interface so the sampler's tests can put a broken one in.
type KernelFilter interface {
	// Attach sets the filter on one sampling event.
	Attach(eventFD int) error
	// SetRanges says which code a sample's call chain must touch.
	SetRanges([]kfilter.Range) error
	// AddRanges adds code to what it passes.
	AddRanges([]kfilter.Range) error
	// Counts are the samples passed and dropped so far.
	Counts() (kfilter.Counts, error)
	Close() error
}

// LoadKernelFilter loads profile/kfilter's filter: the usual
// SamplerConfig.Filter.
func LoadKernelFilter() (KernelFilter, error) { return kfilter.Load() }

// FilterStats say what the kernel filter did over a capture.
type FilterStats struct {
	// On is whether the capture was filtered; Reason says why not.
	On     bool
	Reason string
	// Passed and Dropped count the samples the filter ran on.
	Passed, Dropped uint64
	// Pages is how many 4 KiB pages of code the filter passed at the
	// capture's end.
	Pages int
}

// traceRunnerTypes are the program types the kernel runs under
// bpf_prog_active (trace_call_bpf, bpf_overflow_handler): while one runs,
// a filtered event's sample is dropped without the filter running, so
// such a program's own samples would all be lost. The sampler samples
// unfiltered while one (not the caller's own) is loaded.
var traceRunnerTypes = map[ebpf.ProgramType]bool{ebpf.Kprobe: true, ebpf.TracePoint: true, ebpf.PerfEvent: true}

// hookFunctions are the kernel functions hookOf and trampolineHookOf name
// hooks by that can be the only hook frame of a stack without a BPF
// frame (hook.go): the filter passes their pages so that hook samples
// are kept. The stats clocks, __bpf_prog_enter and the tracepoints'
// __bpf_trace_<tp> count only under one of these or a trampoline. The
// probes' (probeHooks) matter little today: while a kprobe or uprobe
// program is loaded the sampler does not filter (traceRunnerTypes).
func hookFunction(name string) bool {
	switch name {
	case "trace_call_bpf", "__bpf_trace_run", "perf_syscall_enter", "perf_syscall_exit",
		"syscall_trace_enter", "syscall_exit_work", "trace_sys_enter", "trace_sys_exit",
		"__traceiter_sys_enter", "__traceiter_sys_exit":
		return true
	}
	return strings.HasPrefix(name, "bpf_trace_run")
}

// probeHookFunction names the kprobe and uprobe machinery (hook.go's
// probeHooks and the breakpoint traps). The filter passes their pages
// only while a kprobe-type program is loaded: a page holds other code
// too (the traps share theirs with the kernel's hot entry paths), and
// with them always in, an idle host passed a fifth of its samples.
func probeHookFunction(name string) bool {
	return probeHooks[name] != "" || name == "exc_debug_user" || name == "asm_exc_int3"
}

// bpfSymbolReach bounds a BPF symbol of kallsyms whose length is unknown:
// trampolines and dispatchers take at most a page of JIT code; a program
// the symbolizer could not read, at most up to the next symbol.
const bpfSymbolReach = 4096

// codeRanges is the code a sample's call chain must touch for Build to
// keep it: every function the symbolizer learned, the BPF symbols of
// kallsyms (trampolines, dispatchers, programs it could not read) and
// the hook functions, and, with probes true, the probe machinery's (a
// kprobe-type program is learned). A trampoline attached since kallsyms
// was read is there from its ksymbol record (AddCode), or else missing
// until the next read (see Sampler.refreshFilter).
func (s *Symbolizer) codeRanges() (rs []kfilter.Range, probes bool, err error) {
	ks, err := s.kallsyms()
	if err != nil {
		return nil, false, err
	}
	probes = s.hasProbes()
	s.mu.RLock()
	rs = make([]kfilter.Range, 0, len(s.index)+len(ks.filterRanges))
	for _, f := range s.index {
		rs = append(rs, kfilter.Range{Start: f.start, End: f.end})
	}
	rs = append(rs, s.codeRangesLocked()...)
	s.mu.RUnlock()
	ks.rangesOnce.Do(func() { ks.filterRanges, ks.probeRanges = ks.codeRanges() })
	rs = append(rs, ks.filterRanges...)
	if probes {
		rs = append(rs, ks.probeRanges...)
	}
	return rs, probes, nil
}

// hasProbes says whether a learned program is of the kprobe type
// (kprobes, kretprobes, uprobes, uretprobes, kprobe_multi): the filter
// then passes the probe machinery's pages too.
func (s *Symbolizer) hasProbes() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.tracers {
		if p.typ == ebpf.Kprobe {
			return true
		}
	}
	return false
}

// codeRanges are kallsyms' part of Symbolizer.codeRanges, worked out once
// a read: the walk of 122,000 symbols is most of what a refresh costs.
func (ks *kallsyms) codeRanges() (rs, probes []kfilter.Range) {
	bpfMod := -1
	for i, m := range ks.mods {
		if m == "bpf" {
			bpfMod = i
		}
	}
	for i, sym := range ks.syms {
		end := sym.addr + moduleSymbolReach
		if i+1 < len(ks.syms) {
			end = min(end, ks.syms[i+1].addr)
		}
		switch {
		case int(sym.mod) == bpfMod && bpfMod > 0:
			if !strings.HasPrefix(ks.name(sym), "bpf_prog_") {
				end = min(end, sym.addr+bpfSymbolReach)
			}
		case sym.mod == 0 && hookFunction(ks.name(sym)):
		case sym.mod == 0 && probeHookFunction(ks.name(sym)):
			probes = append(probes, kfilter.Range{Start: sym.addr, End: max(end, sym.addr+1)})
			continue
		default:
			continue
		}
		rs = append(rs, kfilter.Range{Start: sym.addr, End: max(end, sym.addr+1)})
	}
	return rs, probes
}

// trampolineSettle is how long after a program with a trampoline is
// learned kallsyms is read again for the filter: a tool attaches what it
// loaded within moments, and the trampoline exists only once attached.
const trampolineSettle = time.Second

// trampolineReadEvery bounds how often kallsyms is read for trampolines:
// a read costs 150-250 ms of CPU on a 2-vCPU VM (5 MB the kernel formats).
const trampolineReadEvery = time.Minute

// trampolineCheckEvery bounds how often the links of settled programs
// are looked at (a walk of the host's links, a few system calls each).
const trampolineCheckEvery = 10 * time.Second

// reloadForTrampolines reads kallsyms again when a program learned after
// the last read, more than trampolineSettle ago, has a trampoline now: a
// tracing link (fentry, fexit, LSM, extension), or it is a struct_ops
// program (registered through a map, not a link). The last read must be
// trampolineReadEvery old. Settled programs with no such link (the
// iterators, of the same program type, which every bpfperfd and many
// tools load and unload; programs already gone) are forgotten: reading
// kallsyms for each cost an idle daemon among churning tools more than
// its sweeps. A trampoline is missing from the filter's ranges for at
// most trampolineReadEvery plus trampolineCheckEvery after its link.
func (s *Symbolizer) reloadForTrampolines(now time.Time) bool {
	s.mu.RLock()
	ks, checked := s.ks, s.trampolinesChecked
	var settled []uint32
	structOps := false
	for id, at := range s.trampolined {
		if now.Sub(at) >= trampolineSettle {
			settled = append(settled, id)
			if p := s.progs[id]; p != nil && p.typ == ebpf.StructOps {
				structOps = true
			}
		}
	}
	s.mu.RUnlock()
	if len(settled) == 0 || (ks != nil && now.Sub(ks.loaded) < trampolineReadEvery) || now.Sub(checked) < trampolineCheckEvery {
		return false
	}
	linked := structOps
	if !linked {
		withLink := tracingLinks()
		linked = slices.ContainsFunc(settled, func(id uint32) bool { return withLink[id] })
	}
	s.mu.Lock()
	s.trampolinesChecked = now
	if !linked {
		for _, id := range settled {
			delete(s.trampolined, id)
		}
	}
	s.mu.Unlock()
	return linked && s.LoadKallsyms() == nil
}

// tracingLinks are the programs that tracing links (a trampoline each)
// attach, by id. Links that cannot be read are passed over.
func tracingLinks() map[uint32]bool {
	transientfd.Open()
	defer transientfd.Done()
	ids := map[uint32]bool{}
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		if info, err := it.Link.Info(); err == nil && info.Type == link.TracingType {
			ids[uint32(info.Program)] = true
		}
	}
	return ids
}

// tracing lists the learned programs of traceRunnerTypes that own does
// not claim.
func (s *Symbolizer) tracing(own func(id uint32) bool) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []uint32
	for id, p := range s.tracers {
		if !kfilter.Ours(id) && (own == nil || !own(id)) && p.strikes == 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// MaxTracingShare is how busy the tracing programs (traceRunnerTypes)
// may be, together, by bpf_stats, with the filter on: their samples are
// lost, so at most this share of one CPU's (at 99 Hz, one sample every
// 20 s). Busier, the sampler samples unfiltered. A tool's rarely firing
// tracepoint, such as another bpfperfd's load records, leaves it on.
const MaxTracingShare = 0.0005

// tracingRun is a tracing program's bpf_stats run time when last read.
type tracingRun struct {
	ns   uint64
	when time.Time
}

// busyTracing returns a program among ids that ran over MaxTracingShare
// of a CPU since the last call (since its load, the first time), by its
// bpf_stats run time; the runs map is updated. A program that cannot be
// read (gone) does not count. Where stats are off its run time stands
// still and it counts as idle: a daemon keeps them on, at least part of
// the time (--stats.duty).
func busyTracing(ids []uint32, runs map[uint32]tracingRun, now time.Time) (uint32, float64, bool) {
	busyID, busy, found := uint32(0), 0.0, false
	seen := map[uint32]bool{}
	for _, id := range ids {
		seen[id] = true
		ns, loaded, ok := runTime(id)
		if !ok {
			continue
		}
		last, had := runs[id]
		if !had {
			last = tracingRun{when: loaded}
		}
		runs[id] = tracingRun{ns: ns, when: now}
		if span := now.Sub(last.when); span > 0 && ns >= last.ns {
			if share := float64(ns-last.ns) / float64(span); share > MaxTracingShare && share > busy {
				busyID, busy, found = id, share, true
			}
		}
	}
	for id := range runs {
		if !seen[id] {
			delete(runs, id)
		}
	}
	return busyID, busy, found
}

// runTime reads a program's bpf_stats run time and its load time.
func runTime(id uint32) (ns uint64, loaded time.Time, ok bool) {
	transientfd.Open()
	defer transientfd.Done()
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return 0, time.Time{}, false
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return 0, time.Time{}, false
	}
	st, err := prog.Stats()
	if err != nil {
		return 0, time.Time{}, false
	}
	if lt, ok := info.LoadTime(); ok {
		// LoadTime is since boot (CLOCK_BOOTTIME).
		var boot unix.Timespec
		if unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) == nil {
			loaded = time.Now().Add(lt - time.Duration(boot.Nano()))
		}
	}
	return uint64(st.Runtime), loaded, true
}
