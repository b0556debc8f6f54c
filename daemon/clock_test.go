package daemon

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestLatestWindowFreshness: a program's sampled CPU % and sampled perf
// counters come from the latest continuous window while it is recent (two
// --profile.every and 10 s), and are absent after: told by the daemon's
// clock, without sleeping.
func TestLatestWindowFreshness(t *testing.T) {
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &fakeClock{end.Add(time.Second)}
	d := &Daemon{cfg: Config{Now: clock.now}}
	d.prof.cfg.Every = time.Minute
	d.prof.shares, d.prof.covered, d.prof.lastEnd = map[uint32]float64{7: 12.5}, map[uint32]bool{7: true, 8: true}, end
	pc := &api.PerfCounters{Mechanism: api.MechanismSampled, WindowEnd: end}
	d.ctr.smp.last, d.ctr.smp.lastEnd = map[uint32]*api.PerfCounters{7: pc}, end

	if v := d.sampledCPU(7); v == nil || *v != 12.5 {
		t.Errorf("sampled CPU of a program with samples: %v, want 12.5", v)
	}
	if v := d.sampledCPU(8); v == nil || *v != 0 {
		t.Errorf("sampled CPU of an idle program the window covers: %v, want 0", v)
	}
	if v := d.sampledCPU(9); v != nil {
		t.Errorf("sampled CPU of a program the window does not cover: %v, want none", *v)
	}
	if got := d.latestSampled(7); got != pc {
		t.Errorf("latest sampled window %v, want the window", got)
	}

	clock.t = end.Add(2*time.Minute + 10*time.Second)
	if v := d.sampledCPU(7); v == nil {
		t.Error("a window 2m10s old (every 1m) is still recent")
	}
	clock.t = clock.t.Add(time.Millisecond)
	if v := d.sampledCPU(7); v != nil {
		t.Errorf("sampled CPU from a stale window: %v, want none", *v)
	}
	if got := d.latestSampled(7); got != nil {
		t.Errorf("latest sampled window from a stale window: %+v, want none", got)
	}
}
