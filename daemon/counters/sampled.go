package counters

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// The sampled perf counter mechanism (issue 5): each continuous profile
// window (cpu-clock, the profiler that already runs) gives every program
// its samples × period, the CPU time it spent in the window; divided by the
// runs bpf_stats counted over the same window that is ns per run. Where a
// PMU exists, samplers for cycles, instructions and LLC misses run over
// the same windows and give those per run. A sample belongs to the program
// of its innermost BPF frame, so tail-call targets get their own time;
// bpf_stats counts no runs for them, so their per-run figures are absent.
//
// Runs over a window come from the sampler's view: at each window edge the
// counter loop waits for the first sweep after it and interpolates run_cnt
// between the sweeps on either side, so the runs cover the window the
// samples do.

// sampledEvents are the events of the sampled mechanism, in store column
// order.
var sampledEvents = perfevent.All

// sampling is the sampled mechanism's state, inside counting.
type sampling struct {
	mu sync.Mutex
	// pending is the window the profiler is capturing now.
	pending *sampledWindow
	// last is each program's latest window.
	last    map[uint32]*api.PerfCounters
	lastEnd time.Time
	windows int64
	// stats are the latest window's capture figures and errors, by event.
	stats map[perfevent.Event]profile.CaptureStats
	errs  map[perfevent.Event]error
}

// sampledWindow is what is gathered over one profile window besides the
// profiles: run counts at its start.
type sampledWindow struct {
	start     time.Time
	runsStart chan map[uint32]float64 // run_cnt at start, interpolated
}

// WindowStarts is the profiler's WindowStarts hook: it starts reading
// run counts at the window's start. It does not block.
func (c *Counters) WindowStarts(ctx context.Context, start time.Time) {
	s := &c.smp
	w := &sampledWindow{start: start, runsStart: make(chan map[uint32]float64, 1)}
	go func() { w.runsStart <- c.runsAt(ctx, start) }()
	s.mu.Lock()
	s.pending = w
	s.mu.Unlock()
}

// WindowEnds is called with each continuous window (the main
// event's profile and every other event's over the same time): it
// finishes the window started last off the profiler's goroutine.
func (c *Counters) WindowEnds(ctx context.Context, pw *profile.Window) {
	s := &c.smp
	s.mu.Lock()
	w := s.pending
	s.pending = nil
	if pw != nil {
		s.stats, s.errs = pw.Stats, pw.Errs
	}
	s.mu.Unlock()
	if w == nil || pw == nil || pw.Profile == nil {
		return
	}
	go c.finishSampled(ctx, w, pw)
}

// finishSampled derives and stores one window's sampled counters.
func (c *Counters) finishSampled(ctx context.Context, w *sampledWindow, pw *profile.Window) {
	start := time.Unix(0, pw.Profile.TimeNanos)
	end := start.Add(time.Duration(pw.Profile.DurationNanos))
	var runsStart map[uint32]float64
	select {
	case runsStart = <-w.runsStart:
	case <-ctx.Done():
		return
	}
	runsEnd := c.runsAt(ctx, end)
	est := map[perfevent.Event]map[uint32]profile.ProgramEstimate{}
	add := func(p *pprof.Profile) {
		e, name, err := profile.ProgramEstimates(p)
		if err != nil {
			return
		}
		for _, ev := range sampledEvents {
			if ev.String() == name || (ev == perfevent.CPUClock && name == "cpu") {
				est[ev] = e
			}
		}
	}
	add(pw.Profile)
	for _, p := range pw.Events {
		add(p)
	}
	runs := map[uint32]float64{}
	for id, b := range runsEnd {
		if a, ok := runsStart[id]; ok && b >= a {
			runs[id] = b - a
		}
	}
	windows := sampledCounters(est, runs, start, end)

	// Only programs the sampler knows get a series (their record exists).
	var samples []store.CounterSample
	c.sampler.Read(func(v sampler.View) {
		for id, pc := range windows {
			p := v.Program(id)
			if p == nil {
				delete(windows, id)
				continue
			}
			samples = append(samples, sampledSample(p.Key(), pc))
		}
	})
	if err := c.store.WriteCounters(samples...); err != nil {
		c.log.Warn("store sampled perf counters", "err", err)
	}
	s := &c.smp
	s.mu.Lock()
	s.last, s.lastEnd = windows, end
	s.windows++
	s.mu.Unlock()
}

// sampledCounters derives each program's window from the event estimates
// (samples × period per program, by event) and the runs bpf_stats counted
// in the window. A program gets a window when samples of any event landed
// in it; its per-run figures need runs (a tail-call target has none) and
// are absent otherwise. An event sampled here whose samples all missed the
// program estimates 0 for it; an event not sampled here is absent.
func sampledCounters(est map[perfevent.Event]map[uint32]profile.ProgramEstimate, runs map[uint32]float64, start, end time.Time) map[uint32]*api.PerfCounters {
	out := map[uint32]*api.PerfCounters{}
	for _, byProg := range est {
		for id, e := range byProg {
			if e.Samples > 0 && out[id] == nil {
				out[id] = sampledWindowOf(id, est, runs, start, end)
			}
		}
	}
	return out
}

func sampledWindowOf(id uint32, est map[perfevent.Event]map[uint32]profile.ProgramEstimate, runs map[uint32]float64, start, end time.Time) *api.PerfCounters {
	var totals [store.CounterEvents]*float64
	var names []string
	pcTotals := map[string]float64{}
	for i, ev := range sampledEvents {
		e, ok := est[ev]
		if !ok {
			continue // not sampled here: absent
		}
		totals[i] = ptr(e[id].Total) // sampled, but no sample in the program: 0
		names = append(names, ev.String())
		pcTotals[ev.String()] = e[id].Total
	}
	// Runs are interpolated; rounded, they are what the store keeps, so
	// the live figures and history agree.
	pc := api.PerfPerRun(uint64(math.Round(runs[id])), totals[:])
	pc.Mechanism, pc.Events, pc.WindowStart, pc.WindowEnd = api.MechanismSampled, names, start, end
	pc.Samples, pc.Totals = uint64(est[perfevent.CPUClock][id].Samples), pcTotals
	return pc
}

// sampledSample is one program's window as stored.
func sampledSample(k store.InstanceKey, pc *api.PerfCounters) store.CounterSample {
	s := store.CounterSample{Key: k, Time: pc.WindowEnd, Mechanism: store.CounterSampled, Counted: pc.CountedRuns,
		WindowMs: uint64(pc.WindowEnd.Sub(pc.WindowStart).Milliseconds()), Samples: pc.Samples}
	for i, ev := range sampledEvents {
		if v, ok := pc.Totals[ev.String()]; ok {
			s.Present |= 1 << i
			s.Values[i] = uint64(math.Round(v))
		}
	}
	return s
}

// SampledFromStore is a stored sampled window as the API shows it.
func SampledFromStore(s store.CounterSample) *api.PerfCounters {
	var totals [store.CounterEvents]*float64
	var names []string
	pcTotals := map[string]float64{}
	for i := range store.CounterEvents {
		if s.Has(i) {
			totals[i] = ptr(float64(s.Values[i]))
			names = append(names, sampledEvents[i].String())
			pcTotals[sampledEvents[i].String()] = float64(s.Values[i])
		}
	}
	pc := api.PerfPerRun(s.Counted, totals[:])
	pc.Mechanism, pc.Events, pc.Totals, pc.Samples = api.MechanismSampled, names, pcTotals, s.Samples
	pc.WindowEnd = s.Time
	pc.WindowStart = s.Time.Add(-time.Duration(s.WindowMs) * time.Millisecond)
	return pc
}

// runsAt returns each loaded program's run_cnt at t, interpolated between
// the sweeps before and after t. It waits for the first sweep after t (at
// most two intervals and a second). A program loaded after t ran 0 times
// by then; one whose count at t cannot be told is left out.
func (c *Counters) runsAt(ctx context.Context, t time.Time) map[uint32]float64 {
	if !c.sampler.WaitTick(ctx, t, 2*c.interval+time.Second) && ctx.Err() != nil {
		return nil
	}
	var out map[uint32]float64
	c.sampler.Read(func(v sampler.View) {
		out = make(map[uint32]float64, v.Len())
		for id, p := range v.Programs() {
			if n, ok := interpolateRuns(p, t); ok {
				out[id] = n
			}
		}
	})
	return out
}

// interpolateRuns is p's run_cnt at t from the sampler's last two sweeps.
func interpolateRuns(p *sampler.Program, t time.Time) (float64, bool) {
	c, curAt := p.Latest()
	pv, prevAt, havePrev := p.Previous()
	cur := float64(c.RunCnt)
	switch {
	case !curAt.After(t):
		return cur, true // no sweep after t yet: the latest count
	case havePrev && !prevAt.After(t):
		prev := float64(pv.RunCnt)
		span := curAt.Sub(prevAt)
		if span <= 0 {
			return cur, true
		}
		return prev + (cur-prev)*float64(t.Sub(prevAt))/float64(span), true
	case !p.Meta().LoadedAt.IsZero() && p.Meta().LoadedAt.After(t):
		return 0, true
	}
	return 0, false
}

// latestSampled is the program's latest sampled window, nil when none is
// recent (no continuous window covered it lately).
func (c *Counters) latestSampled(id uint32) *api.PerfCounters {
	s := &c.smp
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.last[id]
	if pc == nil || c.now().Sub(s.lastEnd) > 2*c.prof.Every()+10*time.Second {
		return nil
	}
	return pc
}

// sampledStatus lists the sampled mechanism per event: available or why
// not, what it produces, and the latest window's rate, samples, losses,
// throttling and share of time on the PMU. An event is available only once
// the profiler has opened it.
func (c *Counters) sampledStatus() []api.MechanismStatus {
	prof, every := c.prof.Running()
	s := &c.smp
	s.mu.Lock()
	stats, errs := s.stats, s.errs
	s.mu.Unlock()
	var out []api.MechanismStatus
	for i, ev := range sampledEvents {
		m := api.MechanismStatus{Event: ev.String()}
		switch {
		case prof == nil:
			m.Reason = "CPU profiling is off"
		case every <= 0:
			m.Reason = "continuous profiling is off (--profile.every 0)"
		case prof.EventErrors()[ev] != nil:
			err := prof.EventErrors()[ev]
			m.Reason, m.Detail = counterReason(err), err.Error()
		case errs[ev] != nil:
			m.Reason, m.Detail = counterReason(errs[ev]), errs[ev].Error()
		case prof.Event() != ev && !slices.Contains(prof.Events(), ev):
			m.Reason = "not sampled"
		default:
			m.Available = true
			m.Produces = [][]string{
				{"cpu_clock_ns", "cpu_clock_ns_per_run", "sampled_cpu_percent"},
				{"cycles", "cycles_per_run", "ipc"},
				{"instructions", "instructions_per_run", "ipc", "llc_misses_per_1k_instructions"},
				{"llc-misses", "llc_misses_per_run", "llc_misses_per_1k_instructions"}}[i]
			m.Detail = "sampled over the continuous profile windows"
			if ev == perfevent.CPUClock {
				m.Detail = "each continuous profile window: samples × period per program (innermost BPF frame, tail-call targets included), divided by the runs bpf_stats counted in the window"
			}
			if st, ok := stats[ev]; ok {
				m.Hz, m.Samples, m.Lost, m.Throttled = st.Hz, st.Samples, st.Lost, st.Throttled
				if st.RunningShare > 0 && st.RunningShare < 1 {
					m.RunningShare = ptr(st.RunningShare)
				}
			}
		}
		out = append(out, m)
	}
	return out
}
