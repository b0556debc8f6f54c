package top

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// A counters-only reading moves the rates and keeps what the full listing
// said; a program it does not know asks for a full listing.
func TestUpdateCounters(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_123).Add(456 * time.Microsecond)
	var tb Table
	tb.Update([]api.ProgRow{{ID: 7, Tag: "aa", Name: "xdp_a", BootID: "b", LastSample: t0,
		Counters: api.Counters{RunCnt: 100, RunTimeNs: 5000}}}, t0)
	// The same reading again, at millisecond precision: no new period.
	same := []api.ProgCounters{{ID: 7, Tag: "aa", Counters: api.Counters{RunCnt: 100, RunTimeNs: 5000}, LastSampleMs: t0.UnixMilli()}}
	if !tb.UpdateCounters(same) {
		t.Fatal("a known program asked for a full listing")
	}
	if _, ok := tb.Rows()[0].RunsPerSec(); ok {
		t.Error("a rate from one reading")
	}
	next := []api.ProgCounters{{ID: 7, Tag: "aa", Counters: api.Counters{RunCnt: 1100, RunTimeNs: 55000}, LastSampleMs: t0.Add(time.Second).UnixMilli()}}
	tb.UpdateCounters(next)
	r := tb.Rows()[0]
	if rps, ok := r.RunsPerSec(); !ok || rps != 1000 || r.Name != "xdp_a" {
		t.Errorf("after a counters-only reading: %v runs/s (%v), name %q", rps, ok, r.Name)
	}
	if tb.UpdateCounters(append(next, api.ProgCounters{ID: 8, Tag: "bb"})) {
		t.Error("an unknown program did not ask for a full listing")
	}
	if tb.UpdateCounters(nil); tb.Len() != 0 {
		t.Error("a program missing from the reading stayed")
	}
}
