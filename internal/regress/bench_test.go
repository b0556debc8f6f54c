package regress

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recorded reads a series written by ./record: real per-interval ns/run
// of a steadily loaded program on this (noisy, shared) VM, one interval a
// second as the daemon samples by default. duty picks the columns: 100 is
// the whole interval, as the daemon reads it with stats on all the time;
// below, a share of it as the daemon reads it under that stats duty
// cycle (gatheredEvery). An interval the share saw no run in is a gap: a
// zero Sample, which the replays skip as the daemon stores no point.
func recorded(tb testing.TB, path string, duty int) []Sample {
	every, col := gatheredEvery(duty)
	out := recordedColumn(tb, path, col)
	for i := range out {
		if i%every != every-1 {
			out[i] = Sample{}
		}
	}
	return out
}

// gatheredEvery says how the daemon reads a stats duty share of a 1 s
// interval, and which of the recording's columns replays it. A part
// shorter than 10 stats switches (about 100 ms here: sampler/duty.go) is
// gathered with the next intervals' into one, at the end of one interval
// in every few, and the intervals between carry its rates and give the
// detector no sample: 10% reads the last 100 ms of each interval, 1% the
// last 100 ms of one interval in 10. The recording holds the last 100 ms
// and 10 ms of each interval (its duty10 and duty1 columns, the shares'
// parts before 2026-11-28): a gathered share is replayed as the 100 ms
// column in one interval of every.
func gatheredEvery(duty int) (every, column int) {
	if duty >= 100 {
		return 1, 100
	}
	const partMs, least = 10, 100 // ms of a 1 s interval per percent; 10 switches of 10 ms
	if duty*partMs >= least {
		return 1, duty
	}
	return (least + duty*partMs - 1) / (duty * partMs), 10
}

// recordedColumn reads the series' column for a duty share's last part
// of each interval (100: all of it; 10 and 1: the last 100 ms and 10 ms).
func recordedColumn(tb testing.TB, path string, duty int) []Sample {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	want := "ns_per_run"
	if duty != 100 {
		want = fmt.Sprintf("ns_per_run_duty%d", duty)
	}
	col := -1
	var out []Sample
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, ",")
		if col < 0 { // the header
			if col = slices.Index(fields, want); col < 0 || col+1 >= len(fields) {
				tb.Fatalf("%s: no %s column in %q", path, want, line)
			}
			continue
		}
		if col+1 >= len(fields) {
			tb.Fatalf("%s: short row %q", path, line)
		}
		var smp Sample
		if fields[col] != "" {
			n, err1 := strconv.ParseFloat(fields[col], 64)
			l, err2 := strconv.ParseFloat(fields[col+1], 64)
			if err1 != nil || err2 != nil {
				tb.Fatalf("%s: bad row %q", path, line)
			}
			smp = Sample{NsPerRun: n, RunsPerSec: l}
		}
		out = append(out, smp)
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no samples", path)
	}
	return out
}

// gap says an interval has no point: the share read saw no run.
func gap(s Sample) bool { return s.RunsPerSec == 0 }

// replay feeds a window of the series as the old version and what
// follows, times factor, as the new one, one interval a second (as
// recorded), through a tracker at the default configuration; control, if
// set, is fed beside it as a program that never changes. As the daemon
// does, every interval tells the tracker which version runs (Seen) and
// adds a sample where the interval has one: a gap (an interval a stats
// duty share saw no run in) has none. A decision comes with the first
// sample a window after the reload, so the new version is fed until then
// (for at most another window). It returns the finding and how long after
// the reload it came.
func replay(series, control []Sample, start, w int, factor float64) (*Finding, time.Duration) {
	cfg := DefaultConfig()
	cfg.Window = time.Duration(w) * time.Second
	tr := NewTracker(cfg)
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	reload := t0.Add(time.Duration(w) * time.Second)
	for i := 0; i < 3*w+1 && start+i < len(series); i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		if control != nil {
			tr.Seen("socket_filter/control", "ctl", at)
			if c := control[start+i]; !gap(c) {
				c.At = at
				tr.Observe("socket_filter/control", "ctl", c)
			}
		}
		s := series[start+i]
		s.At = at
		tag := "old"
		if !at.Before(reload) {
			tag, s.NsPerRun = "new", s.NsPerRun*factor
		}
		tr.Seen("socket_filter/p", tag, at)
		if gap(s) {
			continue
		}
		if f := tr.Observe("socket_filter/p", tag, s); f != nil {
			return f, s.At.Sub(reload)
		}
	}
	return nil, 0
}

// BenchmarkDetectorReplay replays the recorded series through the
// detector: trials with no change and trials with +15% after a reload.
//
// At the default window (10 minutes of 1 s intervals: 600 a side) the
// 3,000-interval recording holds only two stretches that do not overlap,
// so those 200 trials start at random offsets and overlap: their rates are
// of windows of one recording, not of independent machines. The
// independent figures are at a 1-minute window (--regressions.window 1m),
// where the recording holds 24 stretches of 121 intervals that share
// none: each is one trial with no change and one with +15%.
//
// Two more recordings were made over the same 50 minutes of a host whose
// two CPUs other work held for the first 25 minutes or so, then quiet:
// the program and its copy run steadily, and run in bursts (0.3-4 s on,
// 0.5-10 s off), as traffic comes. Replayed alone and beside the copy, they tell what the
// gaps of a bursty load cost (most of all at a stats duty, whose share of
// an interval a burst often misses) from what the host's swings cost.
//
// The steady one is replayed four ways: the series alone (nothing tells the
// machine's drift from the program's); beside a copy of the program run
// in step with it (the same code, the same pacing: the closest a
// neighbour can be); beside a different program recorded over the same
// minutes at its own pace from its own goroutine (the daemon's case on a
// host with other busy programs); and alone with its slow drift divided
// out by a centred rolling median of 301 intervals, to tell the interval
// noise from the drift.
//
// And each of those at three stats duty shares, from the same minutes:
// stats on all the time (the default while the budget allows), and as the
// daemon would have read each interval with stats on for only its last
// 10% or 1% (the budget's least share on a busy host), scaled as its duty
// cycle scales them.
func BenchmarkDetectorReplay(b *testing.B) {
	w := int(DefaultWindow / time.Second)
	for _, duty := range duties {
		// One sub-benchmark a duty: its log stays within the ten lines
		// the testing package shows of each.
		b.Run(fmt.Sprintf("duty=%d%%", duty), func(b *testing.B) {
			for _, v := range variants(b, 2*w+2, duty)[:steadyVariants] {
				replayVariant(b, v, w)
			}
		})
		b.Run(fmt.Sprintf("busy/duty=%d%%", duty), func(b *testing.B) {
			for _, v := range variants(b, 2*w+2, duty)[steadyVariants:] {
				replayVariant(b, v, w)
			}
		})
	}
}

// replayVariant runs one variant's trials at the default window and its
// independent trials at a 1-minute window, and reports both.
func replayVariant(b *testing.B, v variant, w int) {
	const short = 60 // 1-minute window: independent trials
	falsePos, detected, delay := trials(v.series, v.control, w)
	b.Logf("%s: %d intervals; window %v (%d a side), 200 overlapping trials: no change: %d/200 findings (%.1f%%, goal <= 1%%); +15%%: %d/200 detected (%.1f%%, goal >= 95%%); decided %v after the reload",
		v.name, len(v.series), DefaultWindow, w, falsePos, float64(falsePos)/2, detected, float64(detected)/2, delay)
	// Every variant as metrics, so that a miss shows in make bench
	// whichever it is. No delay: a reload is decided once a window
	// has run after it, by construction.
	b.ReportMetric(float64(falsePos)/2, "false-positive-%-"+v.key)
	b.ReportMetric(float64(detected)/2, "detected-%-"+v.key)

	n, fp, det := independentTrials(v.series, v.control, short)
	b.Logf("%s: window 1m, %d independent trials: no change: %d findings; +15%%: %d detected", v.name, n, fp, det)
	b.ReportMetric(100*float64(fp)/float64(n), "false-positive-%-1m-independent-"+v.key)
	b.ReportMetric(100*float64(det)/float64(n), "detected-%-1m-independent-"+v.key)
}

// steadyVariants is how many of variants' replays are of the quiet
// host's recording; the busy host's follow.
const steadyVariants = 4

// variant is one way of replaying the recording; key names its metrics.
type variant struct {
	name, key       string
	series, control []Sample
}

// duties are the stats duty shares the replays run at: 100 (stats on all
// the time, the default while the budget allows) and the shares
// recorded beside it, 10% and the budget's least, 1%.
var duties = []int{100, 10, 1}

// variants reads the recordings (testdata/pair.csv, and beside it
// pair_control.csv, the copy run in step, and neighbour.csv, the
// different program; and the busy host's, made over the same minutes:
// busy_steady.csv and busy_bursty.csv, each with its copy) as read at a
// stats duty share, and returns the ways the benchmarks replay them: the
// quiet host's alone, with the copy, with the neighbour, and alone with
// the drift divided out; the busy host's steady and bursty ones, each
// alone and with its copy. Below 100% names and keys say the duty. It
// fails when a recording is shorter than need intervals.
func variants(tb testing.TB, need, duty int) []variant {
	series := recorded(tb, "testdata/pair.csv", duty)
	copied, neighbour := recorded(tb, "testdata/pair_control.csv", duty), recorded(tb, "testdata/neighbour.csv", duty)
	n := min(len(series), len(copied), len(neighbour))
	if n < need {
		tb.Fatalf("recorded series has %d intervals, want at least %d", n, need)
	}
	steady, steadyCopy := recorded(tb, "testdata/busy_steady.csv", duty), recorded(tb, "testdata/busy_steady_control.csv", duty)
	bursty, burstyCopy := recorded(tb, "testdata/busy_bursty.csv", duty), recorded(tb, "testdata/busy_bursty_control.csv", duty)
	nb := min(len(steady), len(steadyCopy), len(bursty), len(burstyCopy))
	if nb < need {
		tb.Fatalf("recorded busy-host series have %d intervals, want at least %d", nb, need)
	}
	vs := []variant{
		{"as recorded, alone", "alone", series[:n], nil},
		{"as recorded, beside a copy run in step", "copy", series[:n], copied[:n]},
		{"as recorded, beside a different program at its own pace", "neighbour", series[:n], neighbour[:n]},
		{"drift divided out", "detrended", detrend(series[:n], 150), nil},
		{"busy-then-quiet host, steady, alone", "busy-steady", steady[:nb], nil},
		{"busy-then-quiet host, steady, beside a copy in step", "busy-steady-copy", steady[:nb], steadyCopy[:nb]},
		{"busy-then-quiet host, in bursts, alone", "busy-bursty", bursty[:nb], nil},
		{"busy-then-quiet host, in bursts, beside a copy in step", "busy-bursty-copy", bursty[:nb], burstyCopy[:nb]},
	}
	if duty != 100 {
		for i := range vs {
			vs[i].name = fmt.Sprintf("stats duty %d%%, %s", duty, vs[i].name)
			vs[i].key = fmt.Sprintf("%s-duty%d", vs[i].key, duty)
		}
	}
	return vs
}

// independentTrials replays every stretch of 2w+1 intervals that shares
// none with another, once unchanged and once +15% after the reload, and
// says how many stretches there were and what was found.
func independentTrials(series, control []Sample, w int) (n, falsePos, detected int) {
	for start := 0; start+2*w+1 <= len(series); start += 2*w + 1 {
		n++
		if f, _ := replay(series, control, start, w, 1); f != nil && f.Kind != "" {
			falsePos++
		}
		if f, _ := replay(series, control, start, w, 1.15); f != nil && f.Kind == KindRegression {
			detected++
		}
	}
	return n, falsePos, detected
}

func trials(series, control []Sample, w int) (falsePos, detected int, delay time.Duration) {
	rng := rand.New(rand.NewPCG(2026, 1123))
	for i := 0; i < 200; i++ {
		start := rng.IntN(len(series) - 2*w - 1)
		if f, _ := replay(series, control, start, w, 1); f != nil && f.Kind != "" {
			falsePos++
		}
		f, d := replay(series, control, start, w, 1.15)
		if f != nil && f.Kind == KindRegression {
			detected++
			delay = max(delay, d)
		}
	}
	return falsePos, detected, delay
}

// detrend divides each interval's ns/run by the median of the 2h+1
// intervals around it (times the series' overall median); gaps stay gaps.
func detrend(series []Sample, h int) []Sample {
	var all []float64
	for _, s := range series {
		if !gap(s) {
			all = append(all, s.NsPerRun)
		}
	}
	overall := Median(all)
	out := make([]Sample, len(series))
	for i, s := range series {
		if gap(s) {
			continue
		}
		var around []float64
		for _, t := range series[max(0, i-h):min(len(series), i+h+1)] {
			if !gap(t) {
				around = append(around, t.NsPerRun)
			}
		}
		s.NsPerRun = s.NsPerRun / Median(around) * overall
		out[i] = s
	}
	return out
}

// BenchmarkDetectorCost is the detector's cost per program per tick: an
// Observe with no reload pending (what almost every tick is), and the one
// decision a reload costs (600 + 600 intervals), which amortized over the
// window's 600 ticks is also given.
func BenchmarkDetectorCost(b *testing.B) {
	series := recorded(b, "testdata/pair.csv", 100)
	w := int(DefaultWindow / time.Second)
	tr := NewTracker(DefaultConfig())
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	const ticks = 100_000
	start := time.Now()
	for i := 0; i < ticks; i++ {
		s := series[i%len(series)]
		s.At = t0.Add(time.Duration(i) * time.Second)
		tr.Observe("socket_filter/p", "old", s)
	}
	observe := time.Since(start) / ticks
	const decisions = 50
	before, after := series[:w], series[w:2*w]
	start = time.Now()
	for i := 0; i < decisions; i++ {
		Compare(before, after, DefaultConfig())
	}
	decide := time.Since(start) / decisions
	b.ReportMetric(float64(observe.Nanoseconds()), "ns/observe")
	b.ReportMetric(float64(decide.Microseconds()), "us/decision")
	b.Logf("per program per tick: %v (Observe, no reload pending); one decision of %d+%d intervals: %v, %v per tick amortized over the window",
		observe, w, w, decide, decide/time.Duration(w))
}

// BenchmarkShiftReplay replays the recorded series through shift
// detection with a 5-minute shift window (300 intervals a side, 60
// buckets of 5): 200 trials at random offsets of one version fed for four
// windows with no change (five comparisons, a half window apart), and 200
// fed as long where it steps up 15% one and a half windows in, with how
// long after the step the finding came. A step is found once a window has
// run past the date it is given, at the next comparison; a finding dated
// more than a bucket before the step found something else, and counts as
// early, not as a detection. The 200 trials overlap (the recording holds
// two stretches of 1,200 intervals); the independent figures are at a
// 1-minute shift window, 12 stretches of 240 that share none. Beside the
// copy and beside the different program recorded with it, and alone,
// where no shift is claimed (nothing tells the machine's drift from the
// program's), so both rates are 0 by design; all are reported. The busy
// host's recordings, alone and beside their copies, the same way. And each at
// the three stats duty shares BenchmarkDetectorReplay replays.
func BenchmarkShiftReplay(b *testing.B) {
	const w, n = 300, 4 * 300
	for _, duty := range duties {
		b.Run(fmt.Sprintf("duty=%d%%", duty), func(b *testing.B) {
			for _, v := range variants(b, n+2, duty)[:3] {
				shiftVariant(b, v, w, n)
			}
		})
		b.Run(fmt.Sprintf("busy/duty=%d%%", duty), func(b *testing.B) {
			for _, v := range variants(b, n+2, duty)[steadyVariants:] {
				shiftVariant(b, v, w, n)
			}
		})
	}
}

// shiftVariant runs one variant's 200 shift trials at a shift window of w
// intervals and its independent trials at a 1-minute one, and reports
// both.
func shiftVariant(b *testing.B, v variant, w, n int) {
	rng := rand.New(rand.NewPCG(2026, 1124))
	starts := make([]int, 200)
	for i := range starts {
		starts[i] = rng.IntN(len(v.series) - n - 1)
	}
	r := shiftTrials(v, starts, w)
	b.Logf("shifts, %s: %d intervals; shift window %ds; no change: %d/%d trials with a finding (goal <= 1%%); +15%% step: %d/%d detected (goal >= 95%%), %d dated before the step, found a median %.0fs after the step (at most %.0fs)",
		v.name, len(v.series), w, r.falsePos, r.trials, r.detected, r.trials, r.early, Median(r.delays), maxOf(r.delays))
	r.report(b, v.key)

	const short = 60
	var independent []int
	for start := 0; start+4*short <= len(v.series); start += 4 * short {
		independent = append(independent, start)
	}
	r = shiftTrials(v, independent, short)
	b.Logf("shifts, %s: shift window %ds, %d independent trials: no change: %d with a finding; +15%% step: %d detected, %d dated before the step",
		v.name, short, r.trials, r.falsePos, r.detected, r.early)
	r.report(b, "1m-independent-"+v.key)
}

// shiftResult counts what a set of shift trials found.
type shiftResult struct {
	trials, falsePos, detected, early int
	delays                            []float64 // seconds from the step to the finding
}

// shiftTrials runs, from each start, four shift windows of w intervals
// unchanged and the same four stepping up 15% one and a half windows in.
func shiftTrials(v variant, starts []int, w int) shiftResult {
	n, step := 4*w, 3*w/2
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	stepAt := t0.Add(time.Duration(step) * time.Second)
	bucket := time.Duration(w) * time.Second / bucketsPerSide
	r := shiftResult{trials: len(starts)}
	for _, start := range starts {
		if fs, _ := shiftReplay(v.series, v.control, start, w, n, 0, 1); len(fs) > 0 {
			r.falsePos++
		}
		fs, at := shiftReplay(v.series, v.control, start, w, n, step, 1.15)
		switch {
		case len(fs) == 0:
		case fs[0].Changed.Before(stepAt.Add(-bucket)):
			r.early++ // dated before the step: not this step found
		case fs[0].Ratio > 1:
			r.detected++
			r.delays = append(r.delays, float64(at-step))
		}
	}
	return r
}

// report gives the counts as percentages of the trials, and the median
// delay from the step, under metric names ending in key.
func (r shiftResult) report(b *testing.B, key string) {
	pct := func(k int) float64 { return 100 * float64(k) / float64(r.trials) }
	b.ReportMetric(pct(r.falsePos), "shift-false-positive-%-"+key)
	b.ReportMetric(pct(r.detected), "shift-detected-%-"+key)
	b.ReportMetric(pct(r.early), "shift-early-%-"+key)
	if len(r.delays) > 0 {
		b.ReportMetric(Median(r.delays), "shift-delay-s-"+key)
	}
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// shiftReplay feeds n intervals of series from start as one version, one a
// second, those from step on times factor, with control beside it, and
// returns the shifts found and the interval the first was found at (-1 if
// none).
func shiftReplay(series, control []Sample, start, w, n, step int, factor float64) ([]*Finding, int) {
	cfg := DefaultConfig()
	cfg.ShiftWindow = time.Duration(w) * time.Second
	tr := NewTracker(cfg)
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	var found []*Finding
	first := -1
	for i := range n {
		s := series[start+i]
		s.At = t0.Add(time.Duration(i) * time.Second)
		if control != nil && !gap(control[start+i]) {
			c := control[start+i]
			c.At = s.At
			tr.Observe("socket_filter/control", "ctl", c)
		}
		if gap(s) {
			continue
		}
		if step > 0 && i >= step {
			s.NsPerRun *= factor
		}
		if f := tr.Observe("socket_filter/p", "v1", s); f != nil && f.Kind == KindShift {
			if first < 0 {
				first = i
			}
			found = append(found, f)
		}
	}
	return found, first
}
