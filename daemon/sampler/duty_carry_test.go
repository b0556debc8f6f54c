package sampler

import (
	"log/slog"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
)

// fakeSwitch is a stats fd whose on time and switch time a test sets.
type fakeSwitch struct{ on, switchTime time.Duration }

func (f *fakeSwitch) Pause() error                   { return nil }
func (f *fakeSwitch) Resume() error                  { return nil }
func (f *fakeSwitch) OnTime(time.Time) time.Duration { return f.on }
func (f *fakeSwitch) CreditOn(d time.Duration)       { f.on += d }
func (f *fakeSwitch) SwitchTime() time.Duration      { return f.switchTime }

// TestPlanGathersShortParts: a share whose part of one interval is
// shorter than 10 switches is gathered into one part every few
// intervals, the same share of the time; at most all of one interval.
func TestPlanGathersShortParts(t *testing.T) {
	for _, tc := range []struct {
		interval   time.Duration
		percent    int
		switchTime time.Duration // 0: not measured yet, taken as 10 ms
		on         time.Duration
		every      int
	}{
		{time.Second, 50, 0, 500 * time.Millisecond, 1},
		{time.Second, 20, 0, 200 * time.Millisecond, 1},
		{time.Second, 10, 0, 100 * time.Millisecond, 1},
		{time.Second, 5, 0, 100 * time.Millisecond, 2},
		{time.Second, 3, 0, 120 * time.Millisecond, 4},
		{time.Second, 1, 0, 100 * time.Millisecond, 10},
		{time.Second, 10, 20 * time.Millisecond, 200 * time.Millisecond, 2},
		{200 * time.Millisecond, 1, 0, 100 * time.Millisecond, 50},
		{100 * time.Millisecond, 3, 0, 100 * time.Millisecond, 34},
	} {
		c := NewDutyCycle(&fakeSwitch{switchTime: tc.switchTime}, tc.percent, tc.interval, slog.New(slog.DiscardHandler))
		on, every := c.plan()
		if on != tc.on || every != tc.every {
			t.Errorf("%d%% of %v, switch %v: on %v one interval in %d, want %v in %d", tc.percent, tc.interval, tc.switchTime, on, every, tc.on, tc.every)
		}
		if share := float64(on) / float64(time.Duration(every)*tc.interval) * 100; share > float64(tc.percent)+1e-9 {
			t.Errorf("%d%% of %v: the plan keeps stats on %.2f%% of the time", tc.percent, tc.interval, share)
		}
	}
}

// TestCarriedRates: in an interval with stats off all through, each
// program moves on at the rates its last on part was scaled to, whether
// the sweep read it or not, and what the kernel counted meanwhile (a
// holder between two probes) is left out; the next on part scales as
// before. Slow rates add up across intervals.
func TestCarriedRates(t *testing.T) {
	sw := &fakeSwitch{}
	c := NewDutyCycle(sw, 10, time.Second, slog.New(slog.DiscardHandler))
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	busy := collectors.Sample{ID: 1, Tag: [8]byte{1}, RunCnt: 1000, RunTimeNs: 100_000}
	slow := collectors.Sample{ID: 2, Tag: [8]byte{2}, RunCnt: 10, RunTimeNs: 5_000}
	read := func(s float64, all bool, blind bool, smps ...collectors.Sample) map[uint32]collectors.Sample {
		t.Helper()
		c.blind, c.blindPart = blind, 200*time.Millisecond
		out := map[uint32]collectors.Sample{}
		for _, smp := range c.scale(smps, at(s), all) {
			if _, dup := out[smp.ID]; dup {
				t.Fatalf("at %vs: program %d twice", s, smp.ID)
			}
			out[smp.ID] = smp
		}
		return out
	}

	read(0, true, false, busy, slow)
	// An on part of 200 ms in the first second: busy ran 2,000 times at
	// 100 ns, slow once; scaled by 5.
	sw.on = 200 * time.Millisecond
	busy.RunCnt, busy.RunTimeNs = 3000, 300_000
	slow.RunCnt, slow.RunTimeNs = 11, 5_500
	got := read(1, true, false, busy, slow)
	if got[1].RunCnt != 1000+10_000 || got[1].RunTimeNs != 100_000+1_000_000 || got[2].RunCnt != 15 {
		t.Fatalf("on part scaled: %+v", got)
	}
	if c.Carried() {
		t.Errorf("an interval with an on part says it was carried")
	}

	// Stats off all through the next two seconds: the sweep reads
	// nothing that changed, and both move on at their rates (busy 10,000
	// runs/s, slow 5/s), at the on part's ns/run.
	got = read(2, false, true)
	if len(got) != 2 || got[1].RunCnt != 21_000 || got[1].RunTimeNs != 2_100_000 || got[2].RunCnt != 20 {
		t.Fatalf("carried interval: %+v", got)
	}
	if !c.Carried() {
		t.Errorf("a carried interval does not say so")
	}
	// A holder counted 5 runs of busy between two probes: left out.
	busy.RunCnt, busy.RunTimeNs = 3005, 300_500
	got = read(3, false, true, busy)
	if len(got) != 2 || got[1].RunCnt != 31_000 || got[2].RunCnt != 25 {
		t.Fatalf("carried interval with the kernel's counters moved: %+v", got)
	}
	// Half seconds: slow's 2.5 runs each add up to 5 a second.
	read(3.5, false, true)
	got = read(4, false, true)
	if got[2].RunCnt != 30 {
		t.Errorf("slow after two carried half seconds: %d runs, want 30", got[2].RunCnt)
	}

	// The next on part: 200 ms again, busy now at 200 ns a run.
	sw.on = 400 * time.Millisecond
	busy.RunCnt, busy.RunTimeNs = 3005+4000, 300_500+800_000
	got = read(5, false, false, busy)
	if len(got) != 1 || got[1].RunCnt != 41_000+20_000 || got[1].RunTimeNs != 4_100_000+4_000_000 {
		t.Fatalf("the next on part: %+v", got)
	}
	// A sweep of every program that no longer finds slow: it is gone,
	// not carried.
	got = read(6, true, true, busy)
	if _, ok := got[2]; ok || len(c.progs) != 1 {
		t.Errorf("a program gone carried on: %+v, %d kept", got, len(c.progs))
	}
}
