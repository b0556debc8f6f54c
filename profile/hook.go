package profile

import (
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
// Unavailable: XDP and TC, whose entry is inlined into the driver and
// qdisc paths (no frame tells the hook's part from the packet's), and
// fentry/fexit trampolines, which this host's kernel refuses (the VM
// tests see them; their frames are BPF code, not counted here).
const LabelHook = "hook"

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
