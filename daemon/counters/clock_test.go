package counters

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/profiling"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestLatestSampledFreshness: a program's sampled perf counters come from
// the latest continuous window while it is recent (two --profile.every
// and 10 s), and are absent after: told by the daemon's clock, without
// sleeping. (Sampled CPU %: profiling's TestLatestWindowFreshness.)
func TestLatestSampledFreshness(t *testing.T) {
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &fakeClock{end.Add(time.Second)}
	c := New(Config{}, Deps{Now: clock.now, Profiler: profiling.New(profiling.Config{Every: time.Minute}, nil, nil, clock.now, "")})
	pc := &api.PerfCounters{Mechanism: api.MechanismSampled, WindowEnd: end}
	c.smp.last, c.smp.lastEnd = map[uint32]*api.PerfCounters{7: pc}, end

	if got := c.latestSampled(7); got != pc {
		t.Errorf("latest sampled window %v, want the window", got)
	}
	clock.t = end.Add(2*time.Minute + 10*time.Second + time.Millisecond)
	if got := c.latestSampled(7); got != nil {
		t.Errorf("latest sampled window from a stale window: %+v, want none", got)
	}
}
