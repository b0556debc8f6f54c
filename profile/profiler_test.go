package profile

import (
	"context"
	"errors"
	"os"
	"strconv"
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
	if share := shareOfOwnProcess(t, d.p, id); share < 50 {
		t.Errorf("on demand: program %d has %.1f%% of this process's samples, want most (it spins)", id, share)
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
	// runs into the next. How late a timer fires on a loaded 2-CPU
	// machine is not this test's business (a window once stopped 400 ms
	// late on a host whose CPUs other work held), so the bounds are the
	// window's own length and the next window's start.
	for i, p := range got {
		if d := time.Duration(p.DurationNanos); d < 450*time.Millisecond {
			t.Errorf("window %d lasted %v, want 500ms (at least 450ms)", i, d)
		}
		share := shareOfOwnProcess(t, p, id)
		t.Logf("window %d: %v, program %d %.1f%% of this process's samples", i, time.Duration(p.DurationNanos), id, share)
		if share < 50 {
			t.Errorf("window %d: program %d has %.1f%% of this process's samples, want most (it spins)", i, id, share)
		}
	}
	end0 := got[0].TimeNanos + got[0].DurationNanos
	if gap := time.Duration(got[1].TimeNanos - got[0].TimeNanos); gap < 650*time.Millisecond || got[1].TimeNanos < end0 {
		t.Errorf("windows start %v apart, the second %v after the first ended: want 700ms, and no overlap",
			gap, time.Duration(got[1].TimeNanos-end0))
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

// shareOfOwnProcess is program id's percentage of the CPU time p's
// samples of this test process stand for. The process spins the program
// on one thread, so it is most of them however busy the host is: a share
// of the whole window (ProgramShares) falls with the CPU time the host
// leaves the spinner (15% on a host whose two CPUs other work held).
func shareOfOwnProcess(t *testing.T, p *profile.Profile, id uint32) float64 {
	t.Helper()
	vi, _ := cpuAndSamples(p)
	if vi < 0 {
		t.Fatal("profile has no cpu value")
	}
	pid := strconv.Itoa(os.Getpid())
	var own, prog int64
	for _, s := range p.Sample {
		if len(s.Label[LabelPID]) == 0 || s.Label[LabelPID][0] != pid {
			continue
		}
		own += s.Value[vi]
		if got, ok := sampleProg(s); ok && got == id {
			prog += s.Value[vi]
		}
	}
	if own == 0 {
		t.Fatalf("no sample of this process (pid %s) in the profile", pid)
	}
	return 100 * float64(prog) / float64(own)
}
