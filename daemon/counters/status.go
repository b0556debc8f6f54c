package counters

import (
	"errors"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// Status reports counters in /v1/status: nil until probed.
func (c *Counters) Status() *api.CountersStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return nil
	}
	st := &api.CountersStatus{
		Exact:    api.MechanismStatus{Available: c.exact != nil},
		WindowMs: c.cfg.Window.Milliseconds(), EveryMs: c.cfg.Every.Milliseconds(), Max: c.cfg.Max,
		Programs: c.cfg.Programs, Counting: c.openWindows(),
	}
	if c.exact != nil {
		st.Exact.Detail = "fentry/fexit around every run of each target, in windows"
		for _, e := range c.events {
			st.Events = append(st.Events, e.String())
		}
	} else {
		st.Exact.Reason, st.Exact.Detail = counterReason(c.support.Exact), c.support.Exact.Error()
	}
	for e, err := range c.support.EventErrors {
		if errors.Is(err, perfevent.ErrEventNotSupported) {
			if st.Unsupported == nil {
				st.Unsupported = make(map[string]string)
			}
			st.Unsupported[e.String()] = counterReason(err)
		}
	}
	for _, tg := range c.targets {
		switch {
		case tg.waiting:
			st.Waiting++
		case tg.failed != "":
			st.Failed++
		default:
			st.Targets++
		}
	}
	st.Sampled = c.sampledStatus()
	return st
}

// Fill adds the last finished window's per-run figures to a row: the
// newer of the exact and the sampled ones. It also marks the exact
// mechanism's own programs as the daemon's while a window is open.
func (c *Counters) Fill(row *api.ProgRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (row.Name == countersEntryName || row.Name == countersExitName) && c.openWindows() > 0 {
		row.Own = true
	}
	last := c.lastCountersLocked(row.ID)
	if last == nil {
		return
	}
	pc := *last
	row.CyclesPerRun, row.InstructionsPerRun, row.IPC, row.LLCMissesPerRun = pc.CyclesPerRun, pc.InstructionsPerRun, pc.IPC, pc.LLCMissesPerRun
	row.PerfCounters = &pc
}

// counterReason is the short reason for a counter error: the kind and the
// errno, as status shows it.
func counterReason(err error) string {
	if err == nil {
		return ""
	}
	var errno unix.Errno
	suffix := ""
	if errors.As(err, &errno) {
		suffix = " (" + unix.ErrnoName(errno) + ")"
	}
	switch {
	case errors.Is(err, collectors.ErrTracingRefused):
		return "tracing programs refused" + suffix
	case errors.Is(err, perfevent.ErrNoPMU):
		return "no PMU" + suffix
	case errors.Is(err, perfevent.ErrEventNotSupported):
		return "not supported by this PMU" + suffix
	case errors.Is(err, perfevent.ErrPMURefused):
		return "the PMU refused this configuration" + suffix
	case errors.Is(err, perfevent.ErrCountersBusy):
		return "counters busy with another tool" + suffix
	case errors.Is(err, perfevent.ErrNotPermitted):
		return "not permitted: CAP_PERFMON or perf_event_paranoid" + suffix
	case errors.Is(err, collectors.ErrNoBTF):
		return "target has no BTF"
	case errors.Is(err, collectors.ErrTooManyTargets):
		return "too many targets"
	case errors.Is(err, collectors.ErrNotPermitted):
		return "not permitted" + suffix
	}
	return err.Error()
}

// counterReasonDetail is the short reason followed by the full error.
func counterReasonDetail(err error) string {
	r := counterReason(err)
	if r == err.Error() {
		return r
	}
	return r + ": " + err.Error()
}

// Last fills into[i] with program ids[i]'s last finished window of
// per-run figures, nil for none.
func (c *Counters) Last(ids []uint32, into []*api.PerfCounters) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, id := range ids {
		into[i] = c.lastCountersLocked(id)
	}
}

// List is every target, by id, with the status (GET /v1/counters).
func (c *Counters) List() api.CountersList {
	out := api.CountersList{Targets: []api.CounterTarget{}}
	if st := c.Status(); st != nil {
		out.Status = *st
	}
	c.mu.Lock()
	for _, tg := range c.targets {
		out.Targets = append(out.Targets, c.view(tg))
	}
	c.mu.Unlock()
	sort.Slice(out.Targets, func(i, j int) bool { return out.Targets[i].ID < out.Targets[j].ID })
	return out
}

// lastCountersLocked is a program's last finished window of per-run
// figures: the newer of the exact and the sampled ones, nil for none.
// Called with c.mu held.
func (c *Counters) lastCountersLocked(id uint32) *api.PerfCounters {
	var last *api.PerfCounters
	if tg := c.targets[id]; tg != nil && tg.last != nil && tg.key.Boot == c.boot {
		last = tg.last
	}
	if s := c.latestSampled(id); s != nil && (last == nil || s.WindowEnd.After(last.WindowEnd)) {
		last = s
	}
	return last
}
