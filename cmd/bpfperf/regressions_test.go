package main

import (
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
)

// show says whether the machine's drift was divided out, and when it could
// not be, that a change of the machine reads as the program's; a shift
// is not called a reload.
func TestPrintRegressionDrift(t *testing.T) {
	for _, c := range []struct {
		kind     string
		controls int
		want     string
	}{
		{"regression", 3, "drift    the machine: x1.100 (median of 3 programs that did not change); each interval is corrected for it"},
		{"shift", 2, "drift    the machine: x1.100 (median of 2 programs that did not change); each interval is corrected for it"},
		{"regression", 0, "drift    not measured: no other program ran one version over both windows"},
	} {
		var out strings.Builder
		r := api.Regression{Kind: c.kind, OldTag: "aaaa", NewTag: "aaaa", Comparison: api.Comparison{Drift: 1.1, Controls: c.controls}}
		r.Explanation.Off = "profiling is off"
		printRegression(&out, r)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%s with %d controls:\n%s\nwant a line with %q", c.kind, c.controls, out.String(), c.want)
		}
		if reloaded := strings.Contains(out.String(), "aaaa -> aaaa, reloaded"); reloaded != (c.kind != "shift") {
			t.Errorf("%s: says reloaded %v:\n%s", c.kind, reloaded, out.String())
		}
	}
}
