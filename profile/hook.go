package profile

import (
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// What a hook costs outside the program: samples in the kernel's
// machinery that enters a program from its hook, which run_time_ns does
// not count. Build labels such samples (they have no BPF frame) with
// LabelHook and keeps them even without BuildOptions.All, so a window
// says what its programs' hooks cost beside what the programs did.
//
// Which frames count, by hook (innermost to outermost, the first match
// decides; the names are the kernel's, 6.1 to 6.18):
//
//   - a stats clock read (sched_clock and its paravirt and TSC readers)
//     called from a BPF runner: "stats_clock", what bpf_stats' timing
//     costs, apart from the hook's own machinery;
//   - perf_syscall_enter, perf_syscall_exit and all they call
//     (perf_trace_buf_alloc, the argument copy, perf_call_bpf_enter,
//     trace_call_bpf, recursion guards): "syscall_enter", "syscall_exit",
//     the syscall tracepoints' perf glue;
//   - syscall_trace_enter, syscall_exit_work and the syscall tracepoint
//     iterators as the innermost frame: "syscall_slow_path", the entry and
//     exit work every system call pays while any syscall tracepoint is on;
//   - __bpf_trace_run and bpf_trace_runN: "raw_tp:<tracepoint>", the name
//     from the __bpf_trace_<tracepoint> frame outside it;
//   - trace_call_bpf elsewhere: "kprobe" under kprobe_perf_func and the
//     ftrace or int3 kprobe handlers, else "tracepoint:<event>" from the
//     perf_trace_<event> frame.
//
// fentry, fexit and fmod_ret on a kernel function run from a trampoline,
// JIT code named bpf_trampoline_<key> in kallsyms: a sample whose
// innermost BPF frame is such a trampoline, with no program's frame on
// the stack, is "trampoline:<function>" (the traced function, the frame
// outside the trampoline) when it is in the trampoline itself or in what
// the trampoline calls to enter and leave each program (__bpf_prog_enter*,
// __bpf_prog_exit*, __bpf_tramp_enter/exit, and what they call: the
// recursion guard, migrate_disable, RCU), or "stats_clock" under them.
// Not counted: the traced function's own body, which an fexit trampoline
// calls (the function's work, not the hook's), and trampolines on a BPF
// program (fentry on a program), whose cost that program's run_time_ns
// already holds and whose samples stay that program's.
//
// Unavailable: XDP and TC, whose entry is inlined into the driver and
// qdisc paths (no frame tells the hook's part from the packet's).
const LabelHook = "hook"

// HookTrampoline prefixes the trampoline hooks: "trampoline:<function>".
const HookTrampoline = "trampoline:"

// HookSyscallSlowPath is the entry and exit work of every system call
// while a syscall tracepoint is on, not only of the traced ones.
const HookSyscallSlowPath = "syscall_slow_path"

// statsClocks read the clock bpf_stats times each run with.
var statsClocks = map[string]bool{
	"sched_clock": true, "sched_clock_noinstr": true, "native_sched_clock": true, "paravirt_sched_clock": true,
	"kvm_sched_clock_read": true, "pvclock_clocksource_read": true, "pvclock_clocksource_read_nowd": true, "read_tsc": true,
}

// bpfRunners call a program (and time it when stats are on).
var bpfRunners = map[string]bool{"trace_call_bpf": true, "__bpf_trace_run": true, "bpf_prog_run_array": true, "__bpf_prog_run": true}

// hookOf names the hook machinery a stack without BPF frames is in, ""
// for none. funcs are the stack's function names, innermost first.
func hookOf(funcs []string) string {
	for i, fn := range funcs {
		if statsClocks[fn] {
			for _, outer := range funcs[i+1:] {
				if bpfRunners[outer] || strings.HasPrefix(outer, "bpf_trace_run") {
					return "stats_clock"
				}
			}
		}
		switch {
		case fn == "perf_syscall_enter":
			return "syscall_enter"
		case fn == "perf_syscall_exit":
			return "syscall_exit"
		case i == 0 && (fn == "syscall_trace_enter" || fn == "syscall_exit_work" ||
			strings.HasPrefix(fn, "__traceiter_sys_") || fn == "trace_sys_enter" || fn == "trace_sys_exit"):
			return HookSyscallSlowPath
		case fn == "__bpf_trace_run" || strings.HasPrefix(fn, "bpf_trace_run"):
			for _, outer := range funcs[i+1:] {
				if tp, ok := strings.CutPrefix(outer, "__bpf_trace_"); ok {
					return "raw_tp:" + tp
				}
			}
			return "raw_tp"
		case fn == "trace_call_bpf":
			for _, outer := range funcs[i+1:] {
				switch outer {
				case "perf_syscall_enter":
					return "syscall_enter"
				case "perf_syscall_exit":
					return "syscall_exit"
				}
				if outer == "kprobe_perf_func" || outer == "kprobe_ftrace_handler" || outer == "kprobe_int3_handler" {
					return "kprobe"
				}
				if ev, ok := strings.CutPrefix(outer, "perf_trace_"); ok && ev != "buf_alloc" && ev != "run_bpf_submit" {
					return "tracepoint:" + ev
				}
			}
			return "tracepoint"
		}
	}
	return ""
}

// trampolineCalls are the kernel functions a trampoline calls around each
// program (kernel/bpf/trampoline.c, 6.1 to 6.18: __bpf_prog_enter,
// __bpf_prog_enter_recur, _sleepable, _lsm_cgroup, the matching exits,
// and __bpf_tramp_enter/exit), by prefix; they time the program too.
var trampolineCalls = []string{"__bpf_prog_enter", "__bpf_prog_exit", "__bpf_tramp_enter", "__bpf_tramp_exit"}

// trampolineTailCalls are what those functions end in with a jump, so
// that the trampoline is their caller on the stack (seen on 6.1: RCU's
// unlock and migrate_enable under the trampoline itself). A traced
// function's body, which an fexit trampoline calls, could end in one of
// them too; so rare a sample is counted as the hook's.
var trampolineTailCalls = map[string]bool{
	"__rcu_read_lock": true, "__rcu_read_unlock": true, "migrate_disable": true, "migrate_enable": true,
	"bpf_prog_inc_misses_counter": true, "update_prog_stats": true,
}

func isTrampolineCall(fn string) bool {
	return trampolineTailCalls[fn] || slices.ContainsFunc(trampolineCalls, func(p string) bool { return strings.HasPrefix(fn, p) })
}

// trampolineKey parses a trampoline's kallsyms name, bpf_trampoline_<key>:
// the key is the BTF object's id << 32 | 1 << 31 | the function's BTF id
// for a kernel or module function (Linux 5.10+: the bit tells it from a
// program's id << 32 | BTF id, a trampoline on a program).
func trampolineKey(sym string) (obj, typ uint32, btfObj, ok bool) {
	s, ok := strings.CutPrefix(sym, "bpf_trampoline_")
	if !ok {
		return 0, 0, false, false
	}
	k, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, 0, false, false
	}
	return uint32(k >> 32), uint32(k & 0x7fffffff), k&0x80000000 != 0, true
}

// FuncNamer names function typ of BTF object obj, kernel false where obj
// is not the kernel's or a module's BTF (kernelbtf.FuncName).
type FuncNamer func(obj, typ uint32) (fn string, kernel bool)

// trampolineHookOf names the hook machinery of a stack whose innermost BPF
// frame, at index bpfAt, is a trampoline and that has no program's frame,
// "" for none. funcs are the stack's function names, innermost first. The
// traced function is named from the trampoline's key through name: the
// frame outside the trampoline may be another symbol at the same address
// (__x64_sys_getppid for BTF's __do_sys_getppid) or, for a sample in the
// trampoline's prologue, its caller's caller. Where name cannot tell, that
// frame names it.
func trampolineHookOf(funcs []string, bpfAt int, name FuncNamer) string {
	if bpfAt < 0 || bpfAt >= len(funcs) {
		return ""
	}
	obj, typ, btfObj, ok := trampolineKey(funcs[bpfAt])
	if !ok {
		return ""
	}
	if bpfAt > 0 && !isTrampolineCall(funcs[bpfAt-1]) {
		return "" // the traced function's body, called by an fexit trampoline
	}
	for _, fn := range funcs[:bpfAt] {
		if statsClocks[fn] {
			return "stats_clock"
		}
	}
	if btfObj && name != nil {
		if fn, _ := name(obj, typ); fn != "" {
			return HookTrampoline + fn
		}
	}
	for _, outer := range funcs[bpfAt+1:] {
		if !strings.HasPrefix(outer, "ftrace_") && outer != "" {
			return HookTrampoline + outer
		}
	}
	return "trampoline"
}

// HookCost is what a hook's samples stand for.
type HookCost struct {
	Samples int64
	Nanos   int64 // CPU time, for cpu-clock profiles
}

// HookCosts sums p's samples by LabelHook. It fails with ErrNoCPUValue
// when p has no cpu/nanoseconds values.
func HookCosts(p *profile.Profile) (map[string]HookCost, error) {
	vi, si := cpuAndSamples(p)
	if vi < 0 {
		return nil, ErrNoCPUValue
	}
	out := map[string]HookCost{}
	for _, s := range p.Sample {
		h := first(s.Label[LabelHook])
		if h == "" || vi >= len(s.Value) {
			continue
		}
		c := out[h]
		c.Nanos += s.Value[vi]
		if si >= 0 && si < len(s.Value) {
			c.Samples += s.Value[si]
		}
		out[h] = c
	}
	return out, nil
}

// cpuAndSamples are the indexes of p's cpu/nanoseconds and samples/count
// values, -1 where it has none.
func cpuAndSamples(p *profile.Profile) (cpu, samples int) {
	cpu, samples = -1, -1
	for i, st := range p.SampleType {
		switch {
		case st.Type == "cpu" && st.Unit == "nanoseconds":
			cpu = i
		case st.Type == "samples" && st.Unit == "count":
			samples = i
		}
	}
	return cpu, samples
}
