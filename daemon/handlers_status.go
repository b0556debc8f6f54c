package daemon

import (
	"net/http"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
)

// status answers GET /v1/status.
func (s *server) status(w http.ResponseWriter, r *http.Request) {
	reply(w, s.d.status(), nil)
}

// status is the daemon as it runs: its sampler, store and own cost, and
// what profiling and perf counters do.
func (d *Daemon) status() api.Status {
	s := d.sampler
	s.mu.RLock()
	st := api.Status{
		Version: d.cfg.Version, PID: os.Getpid(), StartedAt: d.started,
		UptimeSeconds: d.now().Sub(d.started).Seconds(), BootID: d.bootID,
		StatsMode: string(d.stats.Mode()), StatsDetail: d.stats.Detail(),
		IntervalMs: d.cfg.Interval.Milliseconds(), ProgramsLoaded: len(s.progs),
		StorePath: d.store.Path(), StoreBytes: d.store.Size(), LastSample: s.lastTick,
		LastSweepMs: float64(s.lastSweep.Microseconds()) / 1000, LastWriteMs: float64(s.lastWrite.Microseconds()) / 1000,
	}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	st.StoreDamaged = d.store.Damaged()
	st.StoreGone = d.store.Gone()
	if d.duty != nil {
		st.StatsDuty = d.duty.status()
	}
	st.SkippedPrograms, st.SkipReason = s.skipped, s.skipReason
	s.mu.RUnlock()
	var last, total, since uint64
	st.Sweep, st.SweepDetail, last, total, since = s.sweeper.state()
	st.Holders = s.holders.state()
	st.SweepBPFMs = float64(last) / 1e6
	var ts unix.Timespec
	if total > 0 && unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil && uint64(ts.Nano()) > since {
		st.SweepBPFCPUPercent, _ = api.CPUPercent(float64(total), time.Duration(uint64(ts.Nano())-since))
	}
	st.ProgramsSeen, _ = d.store.CountPrograms()
	st.CPUPercent, st.RSSBytes = d.cost.read()
	st.HeapLiveBytes = heapLiveBytes()
	st.Hostname, _ = os.Hostname()
	st.KernelRelease = kernelRelease()
	st.StatsCost = d.statsCostStatus()
	st.Profiling = d.profilingStatus()
	st.Counters = d.countersStatus()
	return st
}

func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
