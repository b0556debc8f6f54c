// Package profile captures CPU profiles of the BPF programs on a host and
// turns them into pprof profiles: where a program spends its time, down to
// the function and the source line, including tail-called programs, which
// bpf_stats charges to the entry program.
//
// The pieces, in the order the daemon uses them:
//
//   - Sampler opens one sampling perf event per online CPU (cpu-clock at
//     Hz, or a hardware event where a PMU exists) with kernel call chains,
//     and Capture reads their ring buffers for a bounded window.
//   - Symbolizer resolves addresses: kernel frames from a cached
//     /proc/kallsyms, BPF frames from the JIT information of each program,
//     read once by Learn when the program appears, so programs unloaded
//     during a capture still resolve.
//   - Build makes a pprof profile of a capture; Merge, Diff and
//     ProgramShares work on such profiles; Marshal and Parse encode them.
//
// # Perf events through go-perf
//
// Events are opened, mapped and read with github.com/elastic/go-perf
// (internal/perfevent defines them once for the whole project); the
// sampling rings are mapped and read by internal/perfring (ring.go says
// why). Capture drains each CPU's ring on a timer, or, where nothing needs
// a timer (Sampler.mustPoll), only when a ring passes its watermark
// (perfring.Watch, the rings' only poller), so there is no wakeup per
// sample; it decodes the one sample layout it asks for itself, sharing
// identical stacks between samples. Until 2026-11-23 the sampler called
// perf_event_open and read the rings by hand; BenchmarkReaderCost
// measured both readers side by side (docs/performance.md) before the
// hand-written one went.
//
// A BPF perf_event program aggregating stacks in a stack map would copy
// less, but the daemon would then load a program of its own, which would
// show up among the programs it watches and cost run time on every sample;
// stack maps drop stacks on hash collisions. None of that pays off at
// 99 Hz.
//
// # The kernel filter
//
// What did pay off (issue 46): on an idle host nearly every sample lands
// outside BPF code, and writing, waking for and parsing it only to drop
// it in Build was half of what the daemon cost at its defaults. With
// SamplerConfig.Filter, a perf_event program of profile/kfilter on each
// event lets through only the samples whose call chain touches a page of
// BPF or hook code (filter.go: the pages, and when tracing programs turn
// it off); it does not aggregate, so profiles are what they were. It is
// the daemon's own program, shown as such.
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
