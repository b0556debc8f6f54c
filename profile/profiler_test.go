package profile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestProfiler: continuous windows come out at the right times and
// lengths, and attribute a program nobody called Learn for; an on-demand
// capture runs beside them, one at a time; bad durations are refused.
func TestProfiler(t *testing.T) {
	privtest.Root(t)
	prof, err := NewProfiler(ProfilerConfig{Sampler: SamplerConfig{Hz: 999, MaxDuration: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	prog, id := loadHotProgram(t)
	w := spin(t, prog)

	if err := prof.Run(context.Background(), time.Second, 2*time.Second, nil); !errors.Is(err, ErrBadDuration) {
		t.Errorf("Run with window > every: %v", err)
	}
	for _, d := range []time.Duration{0, 5*time.Second + 1} {
		if _, err := prof.Capture(context.Background(), perfevent.CPUClock, d); !errors.Is(err, ErrBadDuration) {
			t.Errorf("Capture(%v): %v", d, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	type window struct {
		p   *profile.Profile
		err error
	}
	windows := make(chan window, 10)
	ran := make(chan error)
	go func() {
		ran <- prof.Run(ctx, 700*time.Millisecond, 500*time.Millisecond, func(w *Window, err error) {
			if err != nil {
				windows <- window{nil, err}
				return
			}
			windows <- window{w.Profile, nil}
		})
	}()

	// On demand, beside the continuous windows.
	demand := make(chan window)
	go func() {
		p, err := prof.Capture(context.Background(), perfevent.CPUClock, time.Second)
		demand <- window{p, err}
	}()
	privtest.WaitFor(t, "on-demand capture to start", prof.onDemand.Load)
	if _, err := prof.Capture(context.Background(), perfevent.CPUClock, time.Second); !errors.Is(err, ErrBusy) {
		t.Errorf("second on-demand capture: %v, want ErrBusy", err)
	}
	d := <-demand
	if d.err != nil {
		t.Fatal(d.err)
	}
	if shares, _ := ProgramShares(d.p); shares[id] < 20 {
		t.Errorf("on demand: program share %.1f%%", shares[id])
	}

	var got []*profile.Profile
	for len(got) < 2 {
		w := <-windows
		if w.err != nil {
			t.Fatal(w.err)
		}
		got = append(got, w.p)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	w.check(t)
	// Windows of 500 ms every 700 ms: a window never ends early and never
	// runs into the next; how late a timer fires on a loaded 2-CPU
	// machine is not this test's business (it once took 600+ ms), so the
	// upper bounds are the next window, not 500 ms plus a little.
	for i, p := range got {
		if d := time.Duration(p.DurationNanos); d < 450*time.Millisecond || d >= 700*time.Millisecond {
			t.Errorf("window %d lasted %v, want 500ms (at least 450ms, less than the 700ms between windows)", i, d)
		}
		if shares, _ := ProgramShares(p); shares[id] < 20 {
			t.Errorf("window %d: program share %.1f%%", i, shares[id])
		}
	}
	if gap := time.Duration(got[1].TimeNanos - got[0].TimeNanos); gap < 650*time.Millisecond || gap > 1200*time.Millisecond {
		t.Errorf("windows start %v apart, want 700ms (no sooner; later only by a late timer)", gap)
	}
}

// TestProfilerWindowsCarryEveryEvent: with windows back to back (window ==
// every, the daemon's default), every window carries the profile of each
// other event too; a capture still closing never costs the next window its
// event. Hardware events work the same way where a PMU exists; cpu-clock,
// which every host has, stands in for them here.
func TestProfilerWindowsCarryEveryEvent(t *testing.T) {
	privtest.Root(t)
	prof, err := NewProfiler(ProfilerConfig{
		Sampler: SamplerConfig{Hz: 999, MaxDuration: 5 * time.Second},
		Events:  []perfevent.Event{perfevent.CPUClock, perfevent.Cycles},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := prof.Events(); len(got) == 0 || got[0] != perfevent.CPUClock {
		t.Fatalf("events %v, want cpu-clock first", got)
	}
	if err := prof.EventErrors()[perfevent.Cycles]; err != nil && !errors.Is(err, perfevent.ErrNoPMU) {
		t.Fatalf("cycles: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	windows := make(chan *Window, 10)
	ran := make(chan error, 1)
	go func() {
		ran <- prof.Run(ctx, 300*time.Millisecond, 300*time.Millisecond, func(w *Window, err error) {
			if err != nil {
				t.Error(err)
				return
			}
			windows <- w
		})
	}()
	for i := range 5 {
		w := <-windows
		for _, ev := range prof.Events() {
			p := w.Events[ev]
			if p == nil {
				t.Errorf("window %d has no %v profile (err %v)", i, ev, w.Errs[ev])
				continue
			}
			if d := time.Duration(p.DurationNanos); d < 250*time.Millisecond {
				t.Errorf("window %d: %v profile lasted %v, want 300ms", i, ev, d)
			}
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
}
