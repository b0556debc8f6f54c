package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/daemon/statscost"
)

// statsCostStatus is what stats cost the programs now (statscost).
func (d *Daemon) statsCostStatus() *api.StatsCost {
	var runs float64
	d.sampler.Read(func(v sampler.View) { runs = v.HostRunsPerSec() })
	return d.statsCost.Load().Status(runs, d.sampler.Status(), statscost.Flags{Duty: d.cfg.StatsDuty, Budget: d.cfg.StatsBudget, Mode: d.stats.Mode()})
}

// measureStatsCost measures stats' cost again, after the next tick, and
// answers the new status: POST /v1/stats-cost/measure.
func (d *Daemon) measureStatsCost(ctx context.Context) (*api.StatsCost, error) {
	done, err := d.remeasure("on demand")
	if err != nil {
		return nil, err
	}
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return d.statsCostStatus(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// remeasure asks the duty cycle for a measurement; the channel gets its
// outcome once the measurement replaced the figure in force (or not).
func (d *Daemon) remeasure(why string) (<-chan error, error) {
	if d.duty == nil {
		return nil, errs.StatsCostFixed
	}
	done := make(chan error, 1)
	err := d.duty.Remeasure(why, func(c collectors.StatsCost, err error) {
		if err == nil {
			m := statscost.Measured{At: d.now(), Why: why, Cost: c}
			d.statsCost.Store(&m)
		}
		done <- err
	})
	return done, err
}

// remeasureOnHotplug measures stats' cost again when the online CPUs
// changed since the last tick: what a run costs depends on the CPUs it
// runs on. Called each tick, from the sampler.
func (d *Daemon) remeasureOnHotplug() {
	was, now, changed := d.cpus.changed()
	if !changed || d.duty == nil {
		return
	}
	why := fmt.Sprintf("after the online CPUs changed from %s to %s", was, now)
	if _, err := d.remeasure(why); err != nil && !errors.Is(err, sampler.ErrRemeasurePending) {
		d.cfg.Logger.Warn("cost of BPF stats not measured again", "why", why, "err", err)
	}
}

// cpuWatch notices a CPU going online or offline: it reads the kernel's
// list of online CPUs (one small file) each tick, through an fd it keeps,
// from offset 0 (sysfs makes the list again for each read there): an
// open, stat, poller registration and close each tick cost an idle
// daemon 5% of its CPU (perf record, 1,000 idle programs, 2026-11-28).
type cpuWatch struct {
	path string
	fd   int // -1 until opened
	buf  []byte
	last string
}

func newCPUWatch(path string) *cpuWatch {
	w := &cpuWatch{path: path, fd: -1}
	w.last, _ = w.read()
	return w
}

func (w *cpuWatch) read() (string, error) {
	if w.fd < 0 {
		fd, err := unix.Open(w.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		w.fd, w.buf = fd, make([]byte, 4096)
	}
	n, err := unix.Pread(w.fd, w.buf, 0)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(w.buf[:n])), nil
}

// close lets go of the file.
func (w *cpuWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// changed says whether the list moved since the last call, and from what
// to what. A list that cannot be read is no change.
func (w *cpuWatch) changed() (was, now string, ok bool) {
	now, err := w.read()
	if err != nil || now == w.last || now == "" {
		return "", "", false
	}
	was, w.last = w.last, now
	return was, now, was != ""
}
