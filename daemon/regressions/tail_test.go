package regressions

import (
	"testing"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/store"
)

func TestP99Of(t *testing.T) {
	ws := []store.LatencyWindow{{Timed: 500, Quantiles: [4]uint64{0, 0, 300}}, {Timed: 600, Quantiles: [4]uint64{0, 0, 100}}, {Timed: 0}, {Timed: 700, Quantiles: [4]uint64{0, 0, 200}}}
	if p, n := p99Of(ws); p != 200 || n != 1800 {
		t.Errorf("p99Of = %v, %d; want the median 200 over 1800 runs", p, n)
	}
	if p, _ := p99Of(ws[:2]); p != 200 {
		t.Errorf("p99Of of two windows = %v, want their mean 200", p)
	}
	if p, n := p99Of(nil); p != 0 || n != 0 {
		t.Errorf("no windows: %v %d", p, n)
	}
}

// The tail decides only what the mean left open, by the same minimum
// change either way.
func TestByTail(t *testing.T) {
	up, flat, down := &api.TailComparison{Ratio: 1.5}, &api.TailComparison{Ratio: 1.05}, &api.TailComparison{Ratio: 0.8}
	for _, c := range []struct {
		kind     string
		tc       *api.TailComparison
		want, by string
	}{
		{"", up, "regression", "p99"},
		{"", down, "improvement", "p99"},
		{"", flat, "", ""},
		{"", nil, "", ""},
		{"improvement", up, "improvement", "mean"},
		{"regression", nil, "regression", "mean"},
	} {
		if kind, by := byTail(c.kind, c.tc, 0.10); kind != c.want || by != c.by {
			t.Errorf("byTail(%q, %+v) = %q, %q; want %q, %q", c.kind, c.tc, kind, by, c.want, c.by)
		}
	}
}
