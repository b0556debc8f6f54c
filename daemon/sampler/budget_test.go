package sampler

import "testing"

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
