package httpapi

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

// measureStatsCost answers POST /v1/stats-cost/measure: stats' cost per
// run measured again (stats turned off for a moment after the next tick)
// and what it comes to now.
func (s *server) measureStatsCost(w http.ResponseWriter, r *http.Request) {
	sc, err := s.d.MeasureStatsCost(r.Context())
	reply(w, sc, err)
}

// countsWait is how long status waits for the store's counts: past it,
// a write is stuck (store.Counts) and status answers with the last ones.
const countsWait = 500 * time.Millisecond

// status is the daemon as it runs: its sampler, store and own cost, and
// what profiling and perf counters do.
func (d *daemon) status() api.Status {
	s := d.Sampler.Status()
	st := api.Status{
		Version: d.cfg.Version, PID: os.Getpid(), StartedAt: d.Started,
		UptimeSeconds: d.now().Sub(d.Started).Seconds(), BootID: d.BootID,
		StatsMode: string(d.Stats.Mode()), StatsDetail: d.Stats.Detail(),
		IntervalMs: d.cfg.Interval.Milliseconds(), ProgramsLoaded: s.Programs,
		StorePath: d.Store.Path(), StoreBytes: d.Store.Size(), LastSample: s.LastTick,
		LastSweepMs: float64(s.LastSweep.Microseconds()) / 1000, LastWriteMs: float64(s.LastWrite.Microseconds()) / 1000,
		LastSweepRead: s.LastSweepRead,
		StatsDuty:     s.Duty, SkippedPrograms: s.Skipped, SkipReason: s.SkipReason,
		Sweep: s.Sweep, SweepDetail: s.SweepDetail, Holders: s.Holders, Loaders: s.Loaders,
	}
	if s.LastErr != nil {
		st.LastError = s.LastErr.Error()
	}
	st.StoreDamaged = d.Store.Damaged()
	st.StoreGone = d.Store.Gone()
	st.SweepBPFMs = float64(s.IterLastNs) / 1e6
	var ts unix.Timespec
	if total, since := s.IterTotalNs, s.IterSince; total > 0 && unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil && uint64(ts.Nano()) > since {
		st.SweepBPFCPUPercent, _ = api.CPUPercent(float64(total), time.Duration(uint64(ts.Nano())-since))
	}
	st.CPUPercent, st.RSSBytes, st.HeapLiveBytes = d.Self()
	st.Hostname, _ = os.Hostname()
	st.KernelRelease = kernelRelease()
	st.StatsCost = d.StatsCost()
	st.Profiling = d.Profiling.Status()
	counts := d.Store.Counts(countsWait)
	st.ProgramsSeen = counts.Programs
	st.StoreUnansweredSeconds = counts.Unanswered.Seconds()
	if st.Profiling != nil {
		st.Profiling.StoredProfiles, st.Profiling.StoredBytes = counts.Profiles, counts.ProfileBytes
	}
	st.Counters = d.Counters.Status()
	st.Latency = d.Latency.Status()
	if d.Pods != nil {
		st.Pods = d.Pods()
	}
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
