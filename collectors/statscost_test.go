package collectors

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestStatsCostRefusedWhileHeld: with stats held on (here by this test)
// there is no baseline, and the measurement says so instead of a number.
func TestStatsCostRefusedWhileHeld(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	held, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if c, err := MeasureStatsCost(StatsCostRule{Repeat: 1000, PairsPerBlock: 1, MinBlocks: 1, MaxBlocks: 1}); !errors.Is(err, ErrStatsHeld) {
		t.Errorf("measured %+v, %v while stats were held on; want ErrStatsHeld", c, err)
	}
}

// TestStatsCost measures the cost where nobody else holds stats on (other
// test packages take the same lock; a holder outside the suite makes it a
// skip, never a pass) and checks it against a second mechanism: an
// empty program test-run in batches with stats off and on, timed by Go's
// monotonic clock rather than the kernel's test-run duration.
func TestStatsCost(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	c, err := MeasureStatsCost(DefaultStatsCostRule)
	if errors.Is(err, ErrStatsHeld) {
		privtest.Skip(t, "BPF run-time stats held on by a process outside the test suite: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	// The oracle twice, the least of each (off, on); how far its two
	// measurements of the same batches fall apart is its noise on this
	// host.
	off1, on1 := privtest.StatsCostByWallClock(t, 41, 20000)
	off2, on2 := privtest.StatsCostByWallClock(t, 41, 20000)
	off, on := min(off1, off2), min(on1, on2)
	noise := max(math.Abs(off1-off2), math.Abs(on1-on2))
	t.Logf("stats cost: %.1f ns/run off, %.1f on, %.1f per run (wall clock of the same batches %.1f; %d pairs, settled %v, pairs %.0f-%.0f ns, %v); by the oracle's wall clock %.1f off, %.1f on, %.1f per run (its two measurements %.1f/%.1f, %.1f/%.1f)",
		c.OffNsPerRun, c.OnNsPerRun, c.NsPerRun(), c.WallNsPerRun(), c.Pairs, c.Settled, c.SpreadLowNs, c.SpreadHighNs, c.Took, off, on, on-off, off1, on1, off2, on2)
	rule := DefaultStatsCostRule
	if c.Pairs%rule.PairsPerBlock != 0 || c.Pairs < rule.MinBlocks*rule.PairsPerBlock || c.Pairs > rule.MaxBlocks*rule.PairsPerBlock {
		t.Errorf("%d pairs: want whole blocks of %d, %d to %d blocks", c.Pairs, rule.PairsPerBlock, rule.MinBlocks, rule.MaxBlocks)
	}
	if !(c.SpreadLowNs <= c.SpreadHighNs) || c.SpreadLowNs <= 0 {
		t.Errorf("pairs' spread %.1f-%.1f ns: want a range of positive costs", c.SpreadLowNs, c.SpreadHighNs)
	}
	// Counting reads the clock twice per run: the second mechanism sees
	// a cost, or it proves nothing. Seeing one is standing out from its
	// own noise here, and being large enough that a measured cost of 0
	// would fail the comparison below (within 15% + 1 ns), whatever a
	// clock read costs on this CPU.
	if cost := on - off; cost <= 3*noise || cost <= 0.15*cost+1 {
		t.Fatalf("the wall clock sees stats cost %.1f ns/run (%.1f off, %.1f on; %.1f/%.1f and %.1f/%.1f apart): too little to tell from its noise (%.1f ns) or to compare with",
			cost, off, on, off1, on1, off2, on2, noise)
	}
	if math.Abs(c.OffNsPerRun-off) > 0.3*off+5 {
		t.Errorf("stats off: %.1f ns/run measured, the wall clock says %.1f", c.OffNsPerRun, off)
	}
	if math.Abs(c.NsPerRun()-(on-off)) > 0.15*(on-off)+1 {
		t.Errorf("stats cost: %.1f ns/run measured, the wall clock says %.1f (%.1f off, %.1f on)", c.NsPerRun(), on-off, off, on)
	}
	if !c.Agrees() {
		t.Errorf("the measurement's own clocks disagree: %.1f ns/run by the kernel's timer, %.1f by the wall clock", c.NsPerRun(), c.WallNsPerRun())
	}
}

// TestStatsCostRuleIgnoresInterruptions: the rule's arithmetic on a host
// that interrupts most batches (a fixture: each batch costs what it
// costs, 14 ns off and 50 on, plus a random delay on 70% of them, more on
// the wall clock). The least batches are the clean ones, so the figure is
// the true 36 ns where the pairs' median is far off, and it says it
// settled. The other way round: a host that never settles says so.
func TestStatsCostRuleIgnoresInterruptions(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	noisy := func(ns float64) (kernel, wall float64) {
		if rnd.Float64() < 0.7 {
			ns += 40 * rnd.Float64()
		}
		return ns, ns + 30*rnd.Float64()*rnd.Float64()*rnd.Float64()
	}
	c, err := measureUnder(DefaultStatsCostRule, func() (p pairTimes, err error) {
		p.off, p.wallOff = noisy(14)
		p.on, p.wallOn = noisy(50)
		return p, nil
	}, func(time.Duration) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.2f ns/run (wall %.2f) after %d pairs, settled %v; pairs %.1f-%.1f", c.NsPerRun(), c.WallNsPerRun(), c.Pairs, c.Settled, c.SpreadLowNs, c.SpreadHighNs)
	if math.Abs(c.NsPerRun()-36) > 1 || !c.Settled || !c.Agrees() {
		t.Errorf("%.2f ns/run (wall %.2f), settled %v: want 36 within 1 ns, settled", c.NsPerRun(), c.WallNsPerRun(), c.Settled)
	}
	if c.SpreadHighNs-c.SpreadLowNs < 10 {
		t.Errorf("pairs' interquartile %.1f-%.1f ns: the interruptions should show in it", c.SpreadLowNs, c.SpreadHighNs)
	}
	// Ever-drifting batches never settle: it stops at MaxBlocks and says so.
	drift := 0.0
	c, err = measureUnder(DefaultStatsCostRule, func() (pairTimes, error) {
		drift -= 0.5 // each pair's on batch quicker than the last
		return pairTimes{off: 14, on: 80 + drift, wallOff: 14, wallOn: 80 + drift}, nil
	}, func(time.Duration) {})
	if err != nil {
		t.Fatal(err)
	}
	if rule := DefaultStatsCostRule; c.Settled || c.Pairs != rule.MaxBlocks*rule.PairsPerBlock {
		t.Errorf("drifting: settled %v after %d pairs; want unsettled after %d", c.Settled, c.Pairs, rule.MaxBlocks*rule.PairsPerBlock)
	}
}

// TestStatsCostRuleOutlastsASlowSpell: a host whose runs with stats on
// are 18% slower for its first 150 ms (a fixture on a clock of its own:
// each pair takes 2.4 ms, a pause what it says), like the spell CI met on
// 2026-11-28, where 16 pairs back to back read 80 ns for a true 68. The
// rule's blocks, spread over more than the spell, find 68; the same rule
// with no pause between blocks reads the spell.
func TestStatsCostRuleOutlastsASlowSpell(t *testing.T) {
	measure := func(rule StatsCostRule) StatsCost {
		var now time.Duration
		c, err := measureUnder(rule, func() (pairTimes, error) {
			on := 93.0
			if now < 150*time.Millisecond {
				on = 105
			}
			now += 2400 * time.Microsecond
			return pairTimes{off: 25, on: on, wallOff: 25.5, wallOn: on + 0.5}, nil
		}, func(d time.Duration) { now += d })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := measure(DefaultStatsCostRule); c.NsPerRun() != 68 || !c.Settled {
		t.Errorf("%.1f ns/run, settled %v after %d pairs: want 68, settled", c.NsPerRun(), c.Settled, c.Pairs)
	}
	backToBack := DefaultStatsCostRule
	backToBack.Gap = 0
	if c := measure(backToBack); c.NsPerRun() != 80 {
		t.Errorf("no pause between blocks: %.1f ns/run after %d pairs; want the spell's 80 (or this test proves nothing)", c.NsPerRun(), c.Pairs)
	}
}
