package profile

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// workloadEnv makes the test binary a workload process: it runs the hot
// program in a loop until killed. Benchmarks run it apart so that its CPU
// time is not the sampler's.
const workloadEnv = "BPFPERF_PROFILE_WORKLOAD"

func runWorkload() {
	var objs hotObjects
	if err := loadHotObjects(&objs, nil); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	in := make([]byte, 14)
	os.Stdout.WriteString("ready\n")
	for {
		objs.HotEntry.Run(&ebpf.RunOptions{Data: in, Repeat: 50})
	}
}

// startWorkload starts the workload process and waits until its program
// runs.
func startWorkload(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workloadEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 6)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "ready\n" {
		tb.Fatalf("workload did not start: %q %v", buf[:n], err)
	}
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSampling reports what sampling at 99 Hz on every CPU costs this
// process, as a percentage of one core: CPU time over a 20 s capture (with
// a BPF workload running in another process, and the symbolizer watching
// for new programs), less the same process's CPU time while idle.
func BenchmarkSampling(b *testing.B) {
	privtest.Root(b)
	startWorkload(b)
	sym := NewSymbolizer(SymbolizerConfig{})
	if err := sym.LoadKallsyms(); err != nil {
		b.Fatal(err)
	}
	s := newSampler(b, SamplerConfig{Hz: 99, Symbolizer: sym})
	const idle, window = 5 * time.Second, 20 * time.Second
	for b.Loop() {
		t0 := cpuTime()
		time.Sleep(idle)
		idleCPU := cpuTime() - t0

		t0 = cpuTime()
		c, err := s.Capture(context.Background(), window)
		capCPU := cpuTime() - t0
		if err != nil {
			b.Fatal(err)
		}
		cost := capCPU.Seconds()/c.Duration.Seconds() - idleCPU.Seconds()/idle.Seconds()
		b.ReportMetric(100*cost, "cpu%_of_one_core")
		b.ReportMetric(float64(len(c.Samples))/c.Duration.Seconds(), "samples/s")
		b.ReportMetric(float64(c.Lost), "lost")
	}
}

// BenchmarkSymbolize reports how long Build takes for a 60 s profile's
// worth of samples (99 Hz on every CPU for 60 s), taken for real at 999 Hz
// over 6 s while a BPF program runs, with kallsyms already cached; and how
// large the stored (gzipped) profile is. Default: samples with BPF frames
// only; _all: every kernel sample.
func BenchmarkSymbolize(b *testing.B) {
	privtest.Root(b)
	startWorkload(b)
	sym := NewSymbolizer(SymbolizerConfig{})
	if err := sym.LoadKallsyms(); err != nil {
		b.Fatal(err)
	}
	if _, err := sym.LearnAll(); err != nil {
		b.Fatal(err)
	}
	s := newSampler(b, SamplerConfig{Hz: 999})
	c, err := s.Capture(context.Background(), 6*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	// A vCPU the host stops loses samples: top up to exactly 60 s at
	// 99 Hz on every CPU by repeating real ones.
	c.Hz, c.Period, c.Duration = 99, uint64(time.Second/99), time.Minute
	real := len(c.Samples)
	for i := 0; len(c.Samples) < 60*99*c.CPUs; i++ {
		c.Samples = append(c.Samples, c.Samples[i%real])
	}
	c.Samples = c.Samples[:60*99*c.CPUs]
	for i := range c.Samples {
		c.Samples[i].Period = c.Period
	}
	for b.Loop() {
		for _, all := range []bool{false, true} {
			var times []time.Duration
			var size int
			for range 11 {
				t0 := time.Now()
				p, err := Build(c, sym, BuildOptions{All: all})
				times = append(times, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				blob, err := Marshal(p)
				if err != nil {
					b.Fatal(err)
				}
				size = len(blob)
			}
			slices.Sort(times)
			suffix := ""
			if all {
				suffix = "_all"
			}
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "build_ms"+suffix)
			b.ReportMetric(float64(size), "bytes/60s"+suffix)
			b.ReportMetric(float64(size)*60/1e6, "MB/hour"+suffix)
		}
		b.ReportMetric(float64(len(c.Samples)), "samples")
	}
}

// interruptGaps spins on one OS thread for d and adds up the gaps between
// consecutive clock reads that look like an interrupt (2 µs to 200 µs:
// longer ones are the scheduler running another task).
func interruptGaps(d time.Duration) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var total time.Duration
	start := time.Now()
	last := start
	for last.Sub(start) < d {
		now := time.Now()
		if g := now.Sub(last); g > 2*time.Microsecond && g < 200*time.Microsecond {
			total += g
		}
		last = now
	}
	return total
}

// BenchmarkSampleInterrupt estimates what each sample costs inside the
// kernel (the timer interrupt, the call-chain walk, the ring write): time
// that getrusage charges to whichever task the sample interrupted, not to
// the sampler. A thread spinning on the clock sees each sample as a gap;
// the gaps with sampling at 999 Hz, less those without, divided by the
// samples that hit it, give the cost per sample, and from it the kernel
// cost of 99 Hz on every CPU in % of one core.
func BenchmarkSampleInterrupt(b *testing.B) {
	privtest.Root(b)
	s := newSampler(b, SamplerConfig{Hz: 999})
	const d = 3 * time.Second
	for b.Loop() {
		var costs []float64
		for range 3 {
			off := interruptGaps(d)
			done := make(chan struct{})
			go func() {
				s.Capture(context.Background(), d+200*time.Millisecond)
				close(done)
			}()
			time.Sleep(100 * time.Millisecond)
			on := interruptGaps(d)
			<-done
			costs = append(costs, float64(on-off)/(999*d.Seconds()))
		}
		slices.Sort(costs)
		perSample := time.Duration(costs[1])
		b.ReportMetric(float64(perSample.Nanoseconds())/1000, "kernel_us/sample")
		b.ReportMetric(100*perSample.Seconds()*99*float64(len(s.rings)), "kernel_cpu%_of_one_core_at_99Hz")
	}
}

// BenchmarkLearn reports what learning one program costs (get by id, info
// with JIT and BTF line info, close): the daemon pays it once per new
// program.
func BenchmarkLearn(b *testing.B) {
	privtest.Root(b)
	var objs hotObjects
	if err := loadHotObjects(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	id, _ := progID(b, objs.HotEntry)
	const n = 200
	for b.Loop() {
		t0 := time.Now()
		for range n {
			if err := NewSymbolizer(SymbolizerConfig{}).Learn(id); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(t0).Microseconds())/n, "us/program")
	}
}

// BenchmarkHardwareSamplingCost times a fixed BPF workload (the hot
// program, 20,000 test runs, on this goroutine's thread) three ways,
// alternating, 5 times each: with no sampler, with cpu-clock sampling at
// MaxHz on every CPU, and with cpu-clock plus cycles, instructions and LLC
// misses at the highest rate the daemon allows them (MaxHz asked,
// MaxHardwareHz in force). It reports the medians and the ratio of the
// last two: hardware sampling must not slow BPF programs down (target: 2%).
// Where there is no PMU it says so and measures nothing.
func BenchmarkHardwareSamplingCost(b *testing.B) {
	privtest.Root(b)
	hw := []perfevent.Event{perfevent.Cycles, perfevent.Instructions, perfevent.LLCMisses}
	probe, err := NewSampler(SamplerConfig{Event: perfevent.Cycles})
	switch {
	case errors.Is(err, perfevent.ErrNoPMU):
		// Logged, not skipped: make bench shows the reason without -v.
		b.Logf("not measured: %v", err)
		return
	case err != nil:
		b.Fatal(err) // a PMU that refuses, or a broken sampler: not "no PMU"
	}
	probe.Close()
	var objs hotObjects
	if err := loadHotObjects(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	in := make([]byte, 14)
	workload := func() time.Duration {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := time.Now()
		for range 400 {
			if _, err := objs.HotEntry.Run(&ebpf.RunOptions{Data: in, Repeat: 50}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	sampled := func(events ...perfevent.Event) time.Duration {
		var samplers []*Sampler
		for _, ev := range events {
			samplers = append(samplers, newSampler(b, SamplerConfig{Event: ev, Hz: MaxHz}))
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		for _, s := range samplers {
			go func() { s.Capture(ctx, time.Minute); done <- struct{}{} }()
		}
		time.Sleep(50 * time.Millisecond)
		d := workload()
		cancel()
		for range samplers {
			<-done
		}
		for _, s := range samplers {
			s.Close()
		}
		return d
	}
	for b.Loop() {
		var none, clock, all []float64
		for range 5 {
			none = append(none, float64(workload()))
			clock = append(clock, float64(sampled(perfevent.CPUClock)))
			all = append(all, float64(sampled(append([]perfevent.Event{perfevent.CPUClock}, hw...)...)))
		}
		b.ReportMetric(medianF(none)/1e6, "ms_no_sampling")
		b.ReportMetric(medianF(clock)/1e6, "ms_cpu-clock")
		b.ReportMetric(medianF(all)/1e6, "ms_cpu-clock+hw")
		b.ReportMetric(medianF(all)/medianF(clock), "hw/cpu-clock")
	}
}

func medianF(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkReaderCost is what reading samples costs this process: CPU
// time per sample while capturing 999 Hz on every CPU for 5 s with a BPF
// workload running in another process (median of 3), less the idle
// process's CPU over the same time. The sampler's reader was go-perf's
// from 2026-11-23 to 2026-11-25 and is hand-written again since (go-perf
// cannot ask for the samples' cgroup): docs/performance.md has both.
func BenchmarkReaderCost(b *testing.B) {
	privtest.Root(b)
	startWorkload(b)
	s := newSampler(b, SamplerConfig{Hz: 999})
	const window = 5 * time.Second
	for b.Loop() {
		var perSample []float64
		for range 3 {
			t0 := cpuTime()
			time.Sleep(time.Second)
			idle := cpuTime() - t0
			t0 = cpuTime()
			c, err := s.Capture(context.Background(), window)
			cpu := cpuTime() - t0 - time.Duration(float64(idle)*window.Seconds())
			if err != nil {
				b.Fatal(err)
			}
			perSample = append(perSample, float64(cpu.Nanoseconds())/1000/float64(max(len(c.Samples), 1)))
		}
		slices.Sort(perSample)
		b.ReportMetric(perSample[1], "cpu_us/sample")
	}
}

// BenchmarkAttributionCost is what telling who triggered each sample adds
// to the daemon, in its parts: reading samples that carry a cgroup id
// against samples without (999 Hz with a BPF workload, the two samplers
// alternated 5 times, median CPU per sample), one walk of this host's
// cgroup2 tree (what a sample from an unknown cgroup costs, at most once a
// second), and Build plus ProgramTriggers of a window with the cgroups
// named against Build alone. attributed_cpu_% is their sum at the
// daemon's defaults (99 Hz on every CPU, a window a minute, one walk per
// window): the share of one CPU that attribution costs.
func BenchmarkAttributionCost(b *testing.B) {
	privtest.Root(b)
	startWorkload(b)
	root, err := cgroupid.Mount("/proc/self/mountinfo")
	if err != nil {
		b.Skip(err)
	}
	with := newSampler(b, SamplerConfig{Hz: 999})
	without := newSampler(b, SamplerConfig{Hz: 999, noCgroup: true})
	sym := NewSymbolizer(SymbolizerConfig{})
	if _, err := sym.LearnAll(); err != nil {
		b.Fatal(err)
	}
	const window = 3 * time.Second
	perSample := func(s *Sampler) (float64, *Capture) {
		t0 := cpuTime()
		time.Sleep(time.Second)
		idle := cpuTime() - t0
		t0 = cpuTime()
		c, err := s.Capture(context.Background(), window)
		if err != nil {
			b.Fatal(err)
		}
		cpu := cpuTime() - t0 - time.Duration(float64(idle)*window.Seconds())
		return float64(cpu.Nanoseconds()) / 1000 / float64(max(len(c.Samples), 1)), c
	}
	for b.Loop() {
		var withUs, withoutUs []float64
		var last *Capture
		for i := range 5 {
			// Each goes first every other round: the one after a pause
			// reads differently on this VM.
			if i%2 == 1 {
				wo, _ := perSample(without)
				withoutUs = append(withoutUs, wo)
			}
			w, c := perSample(with)
			withUs, last = append(withUs, w), c
			if i%2 == 0 {
				wo, _ := perSample(without)
				withoutUs = append(withoutUs, wo)
			}
		}
		r := cgroupid.NewAt(root, nil)
		t0 := time.Now()
		r.Path(1)
		walk := time.Since(t0)
		const builds = 20
		if _, err := Build(last, sym, BuildOptions{}); err != nil { // kallsyms read once
			b.Fatal(err)
		}
		t0 = time.Now()
		for range builds {
			if _, err := Build(last, sym, BuildOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		plain := time.Since(t0) / builds
		t0 = time.Now()
		for range builds {
			p, err := Build(last, sym, BuildOptions{Cgroups: r})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ProgramTriggers(p); err != nil {
				b.Fatal(err)
			}
		}
		named := time.Since(t0) / builds
		readerDelta := max(medianF(withUs)-medianF(withoutUs), 0)
		// At the defaults: 99 samples a second on each CPU, one window
		// (with its walk and its triggers) a minute, scaled from this
		// window's samples to a minute's.
		cpus := float64(len(with.rings))
		scale := 60 * 99 * cpus / float64(max(len(last.Samples), 1))
		perSecond := readerDelta*1e3*99*cpus + (float64(walk)+float64(max(named-plain, 0))*scale)/60
		b.ReportMetric(medianF(withUs), "cgroup_us/sample")
		b.ReportMetric(medianF(withoutUs), "plain_us/sample")
		b.ReportMetric(float64(walk.Microseconds()), "walk_us")
		b.ReportMetric(float64(plain.Microseconds()), "build_us")
		b.ReportMetric(float64(named.Microseconds()), "build+triggers_us")
		b.ReportMetric(100*perSecond/1e9, "attributed_cpu_%")
	}
}
