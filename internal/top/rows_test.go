package top

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func prog(id uint32, name string, runs, ns uint64, at time.Time) api.ProgRow {
	return api.ProgRow{ID: id, Type: "socket_filter", Name: name, Tag: "0011223344556677", Loaded: true,
		BootID: "boot", Counters: api.Counters{RunCnt: runs, RunTimeNs: ns}, LastSample: at}
}

func ptrTo(v float64) *float64 { return &v }

func TestRowRates(t *testing.T) {
	r := &Row{ProgRow: prog(1, "a", 3000, 600_000, t0.Add(2*time.Second)), prev: api.Counters{RunCnt: 1000, RunTimeNs: 200_000}, prevAt: t0, havePrev: true}
	for _, c := range []struct {
		what string
		f    func() (float64, bool)
		want float64
	}{
		{"runs/s", r.RunsPerSec, 1000},            // 2000 runs in 2 s
		{"avg ns", r.AvgNs, 200},                  // 400 µs over 2000 runs
		{"cpu %", r.CPUPercent, 0.02},             // 400 µs of 2 s
		{"avg since load", r.AvgNsSinceLoad, 200}, // 600 µs over 3000 runs
	} {
		if got, ok := c.f(); !ok || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.what, got, ok, c.want)
		}
	}
	if r.Period() != 2*time.Second {
		t.Errorf("period = %v", r.Period())
	}
}

func TestRowRatesGuards(t *testing.T) {
	for name, r := range map[string]*Row{
		"one reading":        {ProgRow: prog(1, "a", 10, 100, t0)},
		"no time passed":     {ProgRow: prog(1, "a", 10, 100, t0), prev: api.Counters{RunCnt: 5}, prevAt: t0, havePrev: true},
		"counters went back": {ProgRow: prog(1, "a", 10, 100, t0.Add(time.Second)), prev: api.Counters{RunCnt: 50, RunTimeNs: 500}, prevAt: t0, havePrev: true},
	} {
		if v, ok := r.RunsPerSec(); ok {
			t.Errorf("%s: runs/s = %v, want none", name, v)
		}
		if v, ok := r.CPUPercent(); ok {
			t.Errorf("%s: cpu = %v, want none", name, v)
		}
		if v, ok := r.AvgNs(); ok {
			t.Errorf("%s: avg = %v, want none", name, v)
		}
	}
	idle := &Row{ProgRow: prog(1, "a", 10, 100, t0.Add(time.Second)), prev: api.Counters{RunCnt: 10, RunTimeNs: 100}, prevAt: t0, havePrev: true}
	if _, ok := idle.AvgNs(); ok {
		t.Error("avg ns of an idle period should be absent")
	}
	if v, ok := idle.RunsPerSec(); !ok || v != 0 {
		t.Errorf("idle runs/s = %v, %v; want 0", v, ok)
	}
	if _, ok := (&Row{ProgRow: prog(1, "a", 0, 0, t0)}).AvgNsSinceLoad(); ok {
		t.Error("avg since load of a program that never ran should be absent")
	}
}

func TestRowFallsBackToDaemonRates(t *testing.T) {
	p := prog(1, "a", 10, 100, t0)
	p.Rates = api.Rates{RunsPerSec: ptrTo(5), CPUPercent: ptrTo(1.5), AvgNsPerRun: ptrTo(20)}
	r := &Row{ProgRow: p}
	if v, ok := r.RunsPerSec(); !ok || v != 5 {
		t.Errorf("runs/s = %v, %v; want the daemon's 5", v, ok)
	}
	if v, ok := r.CPUPercent(); !ok || v != 1.5 {
		t.Errorf("cpu = %v, %v; want the daemon's 1.5", v, ok)
	}
}

func TestTableUpdate(t *testing.T) {
	var tb Table
	tb.Update([]api.ProgRow{prog(1, "a", 100, 1000, t0), prog(2, "b", 0, 0, t0)}, t0)
	// The daemon has not read the kernel again: the rows keep no pair yet.
	tb.Update([]api.ProgRow{prog(1, "a", 100, 1000, t0), prog(2, "b", 0, 0, t0)}, t0.Add(300*time.Millisecond))
	if r := tb.rows[rowKey{"boot", 1, "0011223344556677"}]; r.havePrev {
		t.Fatal("a repeated reading must not make a pair")
	}
	tb.Update([]api.ProgRow{prog(1, "a", 300, 3000, t0.Add(time.Second))}, t0.Add(time.Second))
	if tb.Len() != 1 {
		t.Fatalf("unloaded program kept: %d rows", tb.Len())
	}
	r := tb.Rows()[0]
	if v, _ := r.RunsPerSec(); v != 200 {
		t.Errorf("runs/s = %v, want 200", v)
	}
	// Same daemon reading again: the pair and its rates stay.
	tb.Update([]api.ProgRow{prog(1, "a", 300, 3000, t0.Add(time.Second))}, t0.Add(1300*time.Millisecond))
	if v, _ := tb.Rows()[0].RunsPerSec(); v != 200 {
		t.Errorf("after a repeated reading runs/s = %v, want 200", v)
	}
	// A reading without a sample time uses the refresh time.
	p := prog(3, "c", 1, 1, time.Time{})
	tb.Update([]api.ProgRow{p}, t0)
	if got := tb.Rows()[0].LastSample; !got.Equal(t0) {
		t.Errorf("last sample = %v, want %v", got, t0)
	}
}
