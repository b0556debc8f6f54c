package profile

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestScrapeSharesContinuousSampler: scrapes are cut out of the running
// continuous sampler's samples. Three at once all succeed (an on-demand
// capture would refuse the second), open no perf event of their own, and
// each covers its whole span, gaps between windows included: with 400 ms
// windows every 1.5 s, a 2 s scrape of a busy program still holds about
// 2 s of its samples.
func TestScrapeSharesContinuousSampler(t *testing.T) {
	privtest.Root(t)
	prof, err := NewProfiler(ProfilerConfig{Sampler: SamplerConfig{Hz: 999, MaxDuration: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	prog, id := loadHotProgram(t)
	if err := prof.Symbolizer().Learn(id); err != nil {
		t.Fatal(err)
	}
	w := spin(t, prog)

	// Not running: a scrape is an on-demand capture.
	if p, err := prof.Scrape(context.Background(), 200*time.Millisecond); err != nil || sampleTotal(p) == 0 {
		t.Fatalf("scrape with no continuous sampler: %d samples, %v", sampleTotal(p), err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error)
	windows := make(chan struct{}, 100)
	go func() {
		ran <- prof.Run(ctx, 1500*time.Millisecond, 400*time.Millisecond, func(*Window, error) { windows <- struct{}{} })
	}()
	<-windows // the sampler runs; now between two windows
	objects := privtest.KernelObjects()

	const scrapes = 3
	const span = 2 * time.Second
	got := make([]*profile.Profile, scrapes)
	errs := make([]error, scrapes)
	spun := threadCPU(w.tid)
	var wg sync.WaitGroup
	for i := range scrapes {
		wg.Go(func() { got[i], errs[i] = prof.Scrape(context.Background(), span) })
	}
	time.Sleep(span / 2)
	during := privtest.KernelObjects()
	wg.Wait()
	spun = threadCPU(w.tid) - spun // a little more than the scrapes' span
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	w.check(t)
	if during != objects {
		t.Errorf("perf events and BPF objects: %d before the scrapes, %d during: a scrape opened events of its own", objects, during)
	}
	for i, p := range got {
		if errs[i] != nil {
			t.Errorf("scrape %d: %v", i, errs[i])
			continue
		}
		if d := time.Duration(p.DurationNanos); d != span {
			t.Errorf("scrape %d lasted %v, want %v", i, d, span)
		}
		// The spinner is in the program nearly all the time it runs: a
		// scrape fed all along holds most of the thread's CPU time over
		// its span; one fed only by the 400 ms windows of every 1.5 s, at
		// most about 40%. The thread's own clock is the measure, not the
		// span: on a host whose CPUs other work held the spinner ran 235
		// ms of the 2 s.
		nanos, err := ProgramNanos(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scrape %d: program's sampled CPU %v, the spinner ran %v over the scrapes", i, time.Duration(nanos[id]), time.Duration(spun))
		if cpu := nanos[id]; float64(cpu) < 0.6*float64(spun) {
			t.Errorf("scrape %d: program's sampled CPU %v, the spinner ran %v over the scrapes: want most of it", i, time.Duration(cpu), time.Duration(spun))
		}
	}
	// After Run stops, scrapes are on-demand captures again.
	if _, err := prof.Scrape(context.Background(), 200*time.Millisecond); err != nil {
		t.Errorf("scrape after Run stopped: %v", err)
	}
}

func sampleTotal(p *profile.Profile) int {
	if p == nil {
		return 0
	}
	return len(p.Sample)
}

// TestScrapeWakesASleepingWindow: a filtered window that sleeps until a
// ring fills (SamplerConfig.Told, an idle host) starts draining on its
// timer when a scrape begins, so the scrape ends about when its span
// does, not when the window or a ring does (10 s here).
func TestScrapeWakesASleepingWindow(t *testing.T) {
	needFilter(t)
	sym := NewSymbolizer(SymbolizerConfig{})
	prof, err := NewProfiler(ProfilerConfig{Sampler: SamplerConfig{Hz: 99, MaxDuration: 20 * time.Second, Symbolizer: sym, Filter: LoadKernelFilter, Own: everyOwn, Told: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error)
	windows := make(chan *Window, 10)
	started := make(chan struct{}, 1)
	prof.cfg.WindowStarts = func(time.Time) {
		select {
		case started <- struct{}{}:
		default:
		}
	}
	go func() {
		ran <- prof.Run(ctx, 10*time.Second, 10*time.Second, func(w *Window, _ error) { windows <- w })
	}()
	<-started
	time.Sleep(500 * time.Millisecond) // the window sleeps by now
	const span = 300 * time.Millisecond
	begun := time.Now()
	_, err = prof.Scrape(context.Background(), span)
	took := time.Since(begun)
	cancel()
	if rerr := <-ran; rerr != nil {
		t.Errorf("Run: %v", rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The first timed drain after the scrape began comes within the
	// filtered drain interval (under a second); the window ends at 10 s.
	if took > span+3*time.Second {
		t.Errorf("a %v scrape returned after %v: it waited for the window, not a drain", span, took)
	}
	t.Logf("a %v scrape returned after %v", span, took)
}
