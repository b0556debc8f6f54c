package daemon_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkDaemon1000Programs runs bpfperfd at its default 1 s interval,
// with sampling alone (100 programs busy; then all idle, with the iterator
// sweep and with the fd sweep) and with continuous profiling (the default),
// over 1,000 loaded programs for 30 s and reports its CPU (relative to one
// core, from /proc/<pid>/stat) and RSS, and the median sweep and store
// write it reports itself.
func BenchmarkDaemon1000Programs(b *testing.B) {
	privtest.Root(b)
	progs := loadFilters(b, "bench_d", 1000)
	for range b.N {
		b.Run("sampling", func(b *testing.B) { daemonCost(b, progs, 100, "--profile.every", "0") })
		b.Run("sampling-idle", func(b *testing.B) { daemonCost(b, progs, 0, "--profile.every", "0") })
		b.Run("sampling-idle-fd-sweep", func(b *testing.B) { daemonCost(b, progs, 0, "--profile.every", "0", "--sweep", "fd") })
		b.Run("with-profiling", func(b *testing.B) { daemonCost(b, progs, 100) })
	}
}

// BenchmarkDaemon10000Programs runs bpfperfd at 1 s over 10,000 idle
// programs with the iterator sweep, sampling alone, and reports its cost
// as BenchmarkDaemon1000Programs does.
func BenchmarkDaemon10000Programs(b *testing.B) {
	privtest.Root(b)
	progs := loadFilters(b, "bench_e", 10000)
	for range b.N {
		b.Run("sampling-idle", func(b *testing.B) { daemonCost(b, progs, 0, "--profile.every", "0") })
	}
}

// loadFilters loads n empty socket filters named prefix0, prefix1, ...,
// closed when the benchmark ends.
func loadFilters(b testing.TB, prefix string, n int) []*ebpf.Program {
	var progs []*ebpf.Program
	b.Cleanup(func() {
		for _, p := range progs {
			p.Close()
		}
	})
	for i := range n {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			b.Fatal(err)
		}
		progs = append(progs, p)
	}
	return progs
}

// daemonCost runs bpfperfd with args for 30 s over progs, the first busy
// of them running 3 times a second, and reports its cost.
func daemonCost(b *testing.B, progs []*ebpf.Program, busy int, args ...string) {
	{
		state := b.TempDir()
		// BPFPERF_BENCH_DAEMON_ARGS adds flags, e.g. --debug.cpuprofile=F
		// to see where the daemon's time goes.
		args = append(args, strings.Fields(os.Getenv("BPFPERF_BENCH_DAEMON_ARGS"))...)
		d := startDaemon(b, state, append([]string{"--interval", "1s"}, args...)...)
		// Let it see every program and finish the one-time work on new
		// programs (metadata, and symbols for the profiler: ~100 µs each).
		time.Sleep(8 * time.Second)
		cpu0, at0 := procCPU(b, d.cmd.Process.Pid), time.Now()
		switches0 := contextSwitches(b, d.cmd.Process.Pid)
		var sweeps, writes []float64
		var sweepBPF float64
		for i := range 30 {
			// Keep some programs busy so the store writes real deltas.
			for _, p := range progs[:busy] {
				privtest.Run(p, 3)
			}
			time.Sleep(time.Second)
			if i%5 != 4 {
				continue // poll rarely: the poll itself costs the daemon CPU
			}
			var st api.Status
			if err := d.query(&st, "status"); err != nil {
				b.Fatal(err)
			}
			sweeps, writes = append(sweeps, st.LastSweepMs), append(writes, st.LastWriteMs)
			sweepBPF = st.SweepBPFCPUPercent
		}
		cpu := (procCPU(b, d.cmd.Process.Pid) - cpu0).Seconds() / time.Since(at0).Seconds() * 100
		switches := float64(contextSwitches(b, d.cmd.Process.Pid)-switches0) / time.Since(at0).Seconds()
		rss := rssBytes(b, d.cmd.Process.Pid)
		b.ReportMetric(cpu, "cpu-%")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		// Each wake-up of the daemon's threads costs a context switch or
		// two, and on a paravirtual host those cost more than the work.
		b.ReportMetric(switches, "ctx-switches/s")
		b.ReportMetric(median(sweeps), "sweep-ms")
		b.ReportMetric(median(writes), "write-ms")
		// The iterator program's own run time, part of cpu-% (it runs in
		// the daemon's read()).
		b.ReportMetric(sweepBPF, "sweep-bpf-cpu-%")
		b.ReportMetric(float64(dirSize(b, state))/(1<<20), "store-MiB-30s")
		d.stop(b, syscall.SIGTERM)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// procCPUFine is the CPU time of pid's threads to the nanosecond (the
// first field of each thread's schedstat), where procCPU counts in 10 ms
// ticks: 60 s of an idle daemon at 1,000 programs is 10 ticks, so one
// tick moved its figure by a tenth. Threads that exited are not counted:
// read it only across a span in which none does (a Go process keeps its
// threads once it has started them).
func procCPUFine(b testing.TB, pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			b.Fatalf("%v (schedstat needs CONFIG_SCHED_INFO)", err)
		}
		f := strings.Fields(string(raw))
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatalf("schedstat of thread %s: %q", t.Name(), raw)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// procCPU is utime+stime of pid.
func procCPU(b testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the comm, which may hold spaces, start after ") ".
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// contextSwitches sums the voluntary and involuntary context switches of
// every thread of pid.
func contextSwitches(b *testing.B, pid int) int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

func rssBytes(tb testing.TB, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func dirSize(b *testing.B, dir string) int64 {
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}
