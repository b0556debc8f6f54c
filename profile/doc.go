// Package profile captures CPU profiles of the BPF programs on a host and
// turns them into pprof profiles: where a program spends its time, down to
// the function and the source line, including tail-called programs, which
// bpf_stats charges to the entry program.
//
// The pieces, in the order the daemon uses them:
//
//   - Sampler opens one sampling perf event per online CPU (cpu-clock at
//     Hz, or cycles where a PMU exists) with kernel call chains, and
//     Capture reads their ring buffers for a bounded window.
//   - Symbolizer resolves addresses: kernel frames from a cached
//     /proc/kallsyms, BPF frames from the JIT information of each program,
//     read once by Learn when the program appears, so programs unloaded
//     during a capture still resolve.
//   - Build makes a pprof profile of a capture; Merge, Diff and
//     ProgramShares work on such profiles; Marshal and Parse encode them.
//
// # Why raw perf_event_open and not go-perf or a BPF program
//
// The sampler calls perf_event_open and reads the mmap'ed ring buffers
// itself (golang.org/x/sys/unix), decoding the one record layout it asks
// for. At 99 Hz on every CPU there are a few hundred samples a second, so
// copying them to user space costs little, and a timer-driven drain (no
// wakeup per sample, no poll goroutine per CPU) keeps it at that.
//
// github.com/elastic/go-perf would do the same with more code: it is served
// only at a pseudo-version, reads records one at a time through a poll per
// event, and its generality (groups, counting, every record type) is not
// needed here. A BPF perf_event program aggregating stacks in a stack map
// would copy less, but the daemon would then load a program of its own,
// which would show up among the programs it watches and cost run time on
// every sample; stack maps drop stacks on hash collisions, and the program
// would need clang-built objects and BTF. None of that pays off at 99 Hz.
//
// # Attribution
//
// A sample belongs to the program of its innermost BPF frame: a tail call
// replaces the caller's frame, so time in a tail-call target is its own.
// Samples are kept when their stack has a BPF frame (BuildOptions.All keeps
// every kernel sample). All labels are strings, because numeric labels
// equal to 0 (cpu 0, pid 0) vanish when a profile is written and read back.
//
// Sampling needs CAP_PERFMON (or CAP_SYS_ADMIN); Learn needs CAP_SYS_ADMIN
// to get programs by id and read their BTF.
package profile
