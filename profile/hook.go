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
//   - the probes' own machinery, named by its most specific frame
//     (probeHooks): "kretprobe" (the kretprobe's entry handler, which
//     sets up the return, and its return path from the rethook or
//     kretprobe trampoline to kretprobe_perf_func), "kprobe"
//     (kprobe_dispatcher, kprobe_perf_func, and the ftrace or int3 entry
//     every kprobe and kretprobe takes), "rethook" (the return
//     trampoline of kretprobes and kprobe_multi's return probes, outside
//     their handlers), "uretprobe" (the return
//     address's hijack at entry and the return trampoline's handling, to
//     uretprobe_perf_func), "uprobe" (the breakpoint's trap and
//     single-step, which every uprobe and uretprobe takes at entry, and
//     uprobe_dispatcher; on x86 also any sample in a breakpoint trap
//     or single step from user space, a debugger's as well as a
//     uprobe's) and "kprobe_multi" (the fprobe handlers and
//     kprobe_multi_link_prog_run, which run the program with no
//     trace_call_bpf);
//   - trace_call_bpf elsewhere: "kprobe" under the ftrace or int3 kprobe
//     handlers, else "tracepoint:<event>" from the perf_trace_<event>
//     frame.
//
// Not counted: ftrace's trampoline as the innermost frame (ftrace_trampoline,
// which calls kprobe_ftrace_handler and fprobe_handler, and every other
// ftrace user's handler alike).
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

// HookRethook is the return trampoline kretprobes and kprobe_multi's
// return probes share, where nothing on the stack tells whose.
const HookRethook = "rethook"

// HookSyscallSlowPath is the entry and exit work of every system call
// while a syscall tracepoint is on, not only of the traced ones.
const HookSyscallSlowPath = "syscall_slow_path"

// statsClocks read the clock bpf_stats times each run with.
var statsClocks = map[string]bool{
	"sched_clock": true, "sched_clock_noinstr": true, "native_sched_clock": true, "paravirt_sched_clock": true,
	"kvm_sched_clock_read": true, "pvclock_clocksource_read": true, "pvclock_clocksource_read_nowd": true, "read_tsc": true,
}

// bpfRunners call a program (and time it when stats are on). The
// kprobe_multi handlers run it with bpf_prog_run inlined.
var bpfRunners = map[string]bool{
	"trace_call_bpf": true, "__bpf_trace_run": true, "bpf_prog_run_array": true, "__bpf_prog_run": true,
	"kprobe_multi_link_prog_run": true, "kprobe_multi_link_handler": true, "kprobe_multi_link_exit_handler": true,
}

// probeHooks name the probes' machinery by the kernel functions only that
// probe runs (kernel/trace/trace_kprobe.c, trace_uprobe.c, bpf_trace.c,
// kernel/kprobes.c, kernel/events/uprobes.c, kernel/trace/fprobe.c and
// arch/*/kernel/uprobes.c, 6.1 to 6.18; some are inlined on one kernel
// and not on another, so both a handler and its caller are named).
var probeHooks = map[string]string{
	// The return through the rethook (x86 6.1+) or the kretprobe
	// trampoline (arm64 6.1), to the program; and the entry handler that
	// takes a return instance and hijacks the return address.
	"kretprobe_perf_func": "kretprobe", "kretprobe_dispatcher": "kretprobe", "kretprobe_rethook_handler": "kretprobe",
	"__kretprobe_trampoline_handler": "kretprobe", "trampoline_probe_handler": "kretprobe", "pre_handler_kretprobe": "kretprobe",
	"kprobe_perf_func": "kprobe", "kprobe_dispatcher": "kprobe",
	// A kprobe's entry through ftrace or int3: a kprobe's or a
	// kretprobe's (whose entry handler, inside it, is named above).
	"kprobe_ftrace_handler": "kprobe", "kprobe_int3_handler": "kprobe",
	// The rethook's return trampoline, a kretprobe's or a kprobe_multi's
	// return (6.1-6.13; their handlers, inside it, are named apart).
	"arch_rethook_trampoline": HookRethook, "arch_rethook_trampoline_callback": HookRethook,
	"rethook_trampoline_handler": HookRethook,
	// A uretprobe's return: through the trampoline's breakpoint
	// (handle_trampoline, uprobe_handle_trampoline from 6.12) or the
	// uretprobe system call (x86 6.11+); and, at entry, the return
	// address's hijack.
	"uretprobe_perf_func": "uretprobe", "uretprobe_dispatcher": "uretprobe", "handle_uretprobe_chain": "uretprobe",
	"handle_trampoline": "uretprobe", "uprobe_handle_trampoline": "uretprobe", "__x64_sys_uretprobe": "uretprobe",
	"prepare_uretprobe": "uretprobe", "arch_uretprobe_hijack_return_addr": "uretprobe",
	// The breakpoint every uprobe and uretprobe takes at entry: the
	// trap's notifiers, the handler on the way back to user space and the
	// out-of-line single step.
	"uprobe_perf_func": "uprobe", "uprobe_dispatcher": "uprobe", "handler_chain": "uprobe", "handle_swbp": "uprobe",
	"handle_singlestep": "uprobe", "uprobe_notify_resume": "uprobe", "arch_uprobe_exception_notify": "uprobe",
	"uprobe_pre_sstep_notifier": "uprobe", "uprobe_post_sstep_notifier": "uprobe",
	// fprobe on ftrace (to 6.13) or on the function graph tracer (6.14+),
	// entry and exit.
	"kprobe_multi_link_prog_run": "kprobe_multi", "kprobe_multi_link_handler": "kprobe_multi",
	"kprobe_multi_link_exit_handler": "kprobe_multi", "fprobe_handler": "kprobe_multi", "fprobe_exit_handler": "kprobe_multi",
	"fprobe_kprobe_handler": "kprobe_multi", "fprobe_ftrace_entry": "kprobe_multi", "fprobe_fgraph_entry": "kprobe_multi",
	"fprobe_return": "kprobe_multi", "fprobe_entry": "kprobe_multi", "__fprobe_handler": "kprobe_multi",
}

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
		case probeHooks[fn] != "":
			return probeHooks[fn]
		case fn == "exc_debug_user" || fn == "noist_exc_debug" || i == len(funcs)-1 && (fn == "asm_exc_int3" || fn == "asm_exc_debug"):
			// A breakpoint or single step taken in user space (x86): a
			// uprobe's, or a debugger's. The trap runs with interrupts
			// off, so a timer's sample lands where they come back on, on
			// the way out, with no uprobe frame on the stack.
			return "uprobe"
		case fn == "trace_call_bpf":
			for _, outer := range funcs[i+1:] {
				switch outer {
				case "perf_syscall_enter":
					return "syscall_enter"
				case "perf_syscall_exit":
					return "syscall_exit"
				}
				if h := probeHooks[outer]; h != "" {
					return h
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
