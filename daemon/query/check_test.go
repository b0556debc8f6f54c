package query

import (
	"math"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/store"
)

// driftStore writes a program "prog" that ran version aaaa for a minute,
// then bbbb, change times slower, on a machine that ran slow times slower
// from the reload on; with control, a program "ctl" that ran one version
// across both. Each second is an interval of 1,000 runs, with a few
// percent of noise that both programs share, as a host's does.
func driftStore(t *testing.T, change, slow float64, control bool) *Query {
	t.Helper()
	db := openStore(t)
	progA := ident("prog", "tracepoint a/b")
	progs := []store.Program{
		{Key: store.InstanceKey{ID: 1}, ID: 1, Name: "prog", Type: "tracepoint", Tag: "aaaa", Identity: progA, FirstSeen: t0},
		{Key: store.InstanceKey{ID: 2}, ID: 2, Name: "prog", Type: "tracepoint", Tag: "bbbb", Identity: progA, FirstSeen: t0.Add(60 * time.Second)},
		{Key: store.InstanceKey{ID: 3}, ID: 3, Name: "ctl", Type: "tracepoint", Tag: "cccc", Identity: ident("ctl", "tracepoint c/d"), FirstSeen: t0},
	}
	var runs, progNs, ctlNs [4]uint64
	for i := range 120 {
		tick := store.Tick{Time: t0.Add(time.Duration(i) * time.Second)}
		speed := 1.0
		if i >= 60 {
			speed = slow
		}
		speed *= 1 + 0.03*math.Sin(float64(i)*1.7) // the host's own noise
		put := func(id uint32, ns float64, total *uint64) {
			runs[id] += 1000
			*total += uint64(1000 * ns * speed)
			var s store.Sample
			s.Key = store.InstanceKey{ID: id}
			s.Values[store.ColRunTimeNs], s.Values[store.ColRunCnt] = *total, runs[id]
			tick.Samples = append(tick.Samples, s)
		}
		switch i {
		case 0:
			tick.Loaded = []store.Program{progs[0]}
			if control {
				tick.Loaded = append(tick.Loaded, progs[2])
			}
		case 60:
			tick.Loaded, tick.Unloaded = []store.Program{progs[1]}, []store.InstanceKey{progs[0].Key}
		}
		if i < 60 {
			put(1, 100, &progNs[1])
		} else {
			put(2, 100*change, &progNs[2])
		}
		if control {
			put(3, 50, &ctlNs[3])
		}
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
	}
	return &Query{Store: db, Sampler: sampler.NewFixture(), Now: func() time.Time { return t0.Add(3 * time.Minute) }}
}

// TestCheckDividesDrift: check divides out the machine's drift as the
// detector does. An unchanged program on a machine that ran 1.3x slower
// after the reload passes a 10% limit, with the drift and the one control
// named; a 1.5x slower version on that machine is still found, at about
// x1.5, not x1.95. Without a control the drift stays in the ratio, and
// the result says no control told it.
func TestCheckDividesDrift(t *testing.T) {
	since, until := t0.Add(-time.Minute), t0.Add(3*time.Minute)
	for _, tc := range []struct {
		name             string
		change           float64
		control          bool
		verdict          string
		ratioLo, ratioHi float64
		drift            float64
	}{
		{"unchanged, the machine slower", 1, true, api.VerdictOK, 0.97, 1.03, 1.3},
		{"1.5x slower, the machine slower", 1.5, true, api.VerdictSlower, 1.45, 1.55, 1.3},
		{"unchanged, no control", 1, false, api.VerdictSlower, 1.25, 1.35, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := driftStore(t, tc.change, 1.3, tc.control)
			res, err := q.Check("prog", "", 0.10, since, until)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.verdict || res.Ratio < tc.ratioLo || res.Ratio > tc.ratioHi {
				t.Errorf("check: %s at x%.3f (drift %.3f, %d controls); want %s at x%.2f-%.2f", res.Verdict, res.Ratio, res.Drift, res.Controls, tc.verdict, tc.ratioLo, tc.ratioHi)
			}
			wantControls := 0
			if tc.control {
				wantControls = 1
			}
			if math.Abs(res.Drift-tc.drift) > 0.02 || res.Controls != wantControls {
				t.Errorf("drift x%.3f told by %d controls; want x%.2f by %d", res.Drift, res.Controls, tc.drift, wantControls)
			}
		})
	}
}

// TestCheckLeavesOutCarriedIntervals: at a 1% stats duty the daemon reads
// one interval in ten and carries the others at that part's rates
// (store.Sample.Carried). check compares the parts, one sample each, as
// the live detector does: counted, each part would be ten samples and the
// test ten times surer than the measurements allow. "prog" runs version
// aaaa for 100 s, then bbbb 1.5x slower, each part a few percent off its
// version's figure.
func TestCheckLeavesOutCarriedIntervals(t *testing.T) {
	db := openStore(t)
	id := ident("prog", "tracepoint a/b")
	progs := []store.Program{
		{Key: store.InstanceKey{ID: 1}, ID: 1, Name: "prog", Type: "tracepoint", Tag: "aaaa", Identity: id, FirstSeen: t0},
		{Key: store.InstanceKey{ID: 2}, ID: 2, Name: "prog", Type: "tracepoint", Tag: "bbbb", Identity: id, FirstSeen: t0.Add(100 * time.Second)},
	}
	var runs, total uint64
	var partNs float64
	for i := range 200 {
		tick := store.Tick{Time: t0.Add(time.Duration(i) * time.Second)}
		switch i {
		case 0:
			tick.Loaded = []store.Program{progs[0]}
		case 100:
			tick.Loaded, tick.Unloaded = []store.Program{progs[1]}, []store.InstanceKey{progs[0].Key}
			runs, total = 0, 0
		}
		base := 100.0
		if i >= 100 {
			base = 150
		}
		measured := i%10 == 9 || i%100 == 0
		if measured {
			partNs = base * (1 + 0.03*math.Sin(float64(i)*1.7))
		}
		runs += 1000
		total += uint64(1000 * partNs)
		s := store.Sample{Key: progs[i/100].Key, Carried: !measured}
		s.Values[store.ColRunTimeNs], s.Values[store.ColRunCnt] = total, runs
		tick.Samples = []store.Sample{s}
		if err := db.WriteTick(tick); err != nil {
			t.Fatal(err)
		}
	}
	q := &Query{Store: db, Sampler: sampler.NewFixture(), Now: func() time.Time { return t0.Add(4 * time.Minute) }}
	res, err := q.Check("prog", "", 0.10, t0.Add(-time.Minute), t0.Add(4*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: x%.2f (%.2f-%.2f), p %.2g, %d and %d intervals", res.Verdict, res.Ratio, res.RatioLo, res.RatioHi, res.P, res.NBefore, res.NAfter)
	if res.NBefore != 10 || res.NAfter != 10 {
		t.Errorf("%d intervals before and %d after, want the 10 parts of each side", res.NBefore, res.NAfter)
	}
	if res.Verdict != api.VerdictSlower || res.Ratio < 1.4 || res.Ratio > 1.6 {
		t.Errorf("%s at x%.2f, want slower at about x1.5", res.Verdict, res.Ratio)
	}
}
