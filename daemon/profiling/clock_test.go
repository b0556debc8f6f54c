package profiling

import (
	"testing"
	"time"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestLatestWindowFreshness: a program's sampled CPU % comes from the
// latest continuous window while it is recent (two --profile.every and
// 10 s), and is absent after: told by the daemon's clock, without
// sleeping. (The sampled perf counters' freshness: the daemon's
// TestLatestSampledFreshness.)
func TestLatestWindowFreshness(t *testing.T) {
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &fakeClock{end.Add(time.Second)}
	p := New(Config{Every: time.Minute}, nil, nil, clock.now, "")
	p.shares, p.covered, p.lastEnd = map[uint32]float64{7: 12.5}, map[uint32]bool{7: true, 8: true}, end

	if v := p.SampledCPU(7); v == nil || *v != 12.5 {
		t.Errorf("sampled CPU of a program with samples: %v, want 12.5", v)
	}
	if v := p.SampledCPU(8); v == nil || *v != 0 {
		t.Errorf("sampled CPU of an idle program the window covers: %v, want 0", v)
	}
	if v := p.SampledCPU(9); v != nil {
		t.Errorf("sampled CPU of a program the window does not cover: %v, want none", *v)
	}

	clock.t = end.Add(2*time.Minute + 10*time.Second)
	if v := p.SampledCPU(7); v == nil {
		t.Error("a window 2m10s old (every 1m) is still recent")
	}
	clock.t = clock.t.Add(time.Millisecond)
	if v := p.SampledCPU(7); v != nil {
		t.Errorf("sampled CPU from a stale window: %v, want none", *v)
	}
}
