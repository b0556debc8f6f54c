package daemon

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// countersStatus reports counters in /v1/status: nil until probed.
func (d *Daemon) countersStatus() *api.CountersStatus {
	c := &d.ctr
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
	st.Sampled = d.sampledStatus()
	return st
}

// fillCounters adds the last finished window's per-run figures to a row:
// the newer of the exact and the sampled ones.
// Called with the sampler's lock held. It also marks the exact
// mechanism's own programs as the daemon's while a window is open.
func (d *Daemon) fillCounters(row *api.ProgRow) {
	c := &d.ctr
	c.mu.Lock()
	defer c.mu.Unlock()
	if (row.Name == countersEntryName || row.Name == countersExitName) && c.openWindows() > 0 {
		row.Own = true
	}
	last := d.lastCountersLocked(row.ID)
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

// lastCountersLocked is a program's last finished window of per-run
// figures: the newer of the exact and the sampled ones, nil for none.
// Called with d.ctr.mu held.
func (d *Daemon) lastCountersLocked(id uint32) *api.PerfCounters {
	var last *api.PerfCounters
	if tg := d.ctr.targets[id]; tg != nil && tg.last != nil && tg.key.Boot == d.boot {
		last = tg.last
	}
	if s := d.latestSampled(id); s != nil && (last == nil || s.WindowEnd.After(last.WindowEnd)) {
		last = s
	}
	return last
}
