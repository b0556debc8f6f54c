package sampler

import (
	"log/slog"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
)

// TestBudgetShare: within the budget stats stay on all the time; above
// it the share is the budget over the full-time cost, rounded down so the
// cost stays within; back at 100% only once the cost is 20% under the
// budget, so a load near it does not flip exact and estimated figures.
func TestBudgetShare(t *testing.T) {
	// 1% of one CPU at 70 ns a run: 142,857 runs/s cost exactly the budget.
	for _, c := range []struct {
		cur        int
		runsPerSec float64
		want       int
	}{
		{100, 0, 100},
		{100, 140_000, 100},   // 0.98%: within
		{100, 150_000, 95},    // 1.05%: 1/1.05 = 95.2%
		{100, 1_428_571, 10},  // 10%: a tenth
		{100, 10_000_000, 1},  // 70%: 1.43% rounds down to 1
		{100, 100_000_000, 1}, // 700%: the least share; over budget even so
		{40, 140_000, 99},     // 0.98% from a share: not 20% under, stay below
		{40, 114_285, 100},    // 0.8%: back to exact
		{40, 300_000, 47},     // 2.1%: follows the load down and up
	} {
		b := &budget{percent: 1, nsPerRun: 70}
		if got := b.next(c.cur, c.runsPerSec); got != c.want {
			t.Errorf("at %d%%, %.0f runs/s (full-time cost %.3g%%): share %d%%, want %d%%", c.cur, c.runsPerSec, b.fullCost, got, c.want)
		}
		if c.want < 100 && c.want > 1 {
			if paid := b.fullCost * float64(c.want) / 100; paid > b.percent {
				t.Errorf("%.0f runs/s: %d%% costs %.3g%%, over the budget", c.runsPerSec, c.want, paid)
			}
		}
	}
}

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]float64{"1%": 1, "0.5": 0.5, " 2.5% ": 2.5, "0": 0, "off": 0, "100%": 100} {
		if got, err := ParseBudget(in); err != nil || got != want {
			t.Errorf("ParseBudget(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1%", "101%", "NaN", "1 CPU", "inf"} {
		if _, err := ParseBudget(in); err == nil {
			t.Errorf("ParseBudget(%q): no error", in)
		}
	}
}

// TestBudgetTracksNothingWhileExact: under a budget, with stats on all
// the time, the duty cycle keeps nothing per program and leaves the
// kernel's counters as they are, so an idle host pays no walk over its
// programs for it; a share below 100% starts tracking every program from
// the tick that chose it, and back at 100% with nothing scaled it lets
// them all go.
func TestBudgetTracksNothingWhileExact(t *testing.T) {
	// A zero Stats reads no on-time: every interval counts as wholly on.
	c := NewBudgetCycle(&collectors.Stats{}, 1, 70, time.Second, slog.New(slog.DiscardHandler))
	samples := make([]collectors.Sample, 1000)
	for i := range samples {
		samples[i] = collectors.Sample{ID: uint32(i + 1), RunCnt: uint64(i), RunTimeNs: uint64(100 * i)}
	}
	all := func() []collectors.Sample { return samples }
	at := time.Unix(1000, 0)
	for tick := range 3 {
		c.scale(samples, at.Add(time.Duration(tick)*time.Second), true)
		c.observe(all, 1000) // 0.007% of one CPU: within
	}
	if len(c.progs) != 0 || c.tracking || samples[999].RunCnt != 999 {
		t.Fatalf("exact under the budget: %d programs tracked (tracking %v), counters %+v", len(c.progs), c.tracking, samples[999])
	}
	c.observe(all, 1_000_000) // 7%: over
	if c.percent >= 100 || !c.tracking || len(c.progs) != len(samples) {
		t.Fatalf("over the budget: share %d%%, tracking %v, %d of %d programs", c.percent, c.tracking, len(c.progs), len(samples))
	}
	c.scale(samples, at.Add(4*time.Second), true)
	c.observe(all, 1000)
	if c.percent != 100 || c.tracking || len(c.progs) != 0 {
		t.Errorf("back within, nothing scaled: share %d%%, tracking %v, %d programs kept", c.percent, c.tracking, len(c.progs))
	}
}
