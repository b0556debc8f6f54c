package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// Samples maps a test name to its measurements in ns per run, and
// EventSample's name for a test and a counted event to that event's
// counts per run, so events are compared with the same test as ns.
type Samples map[string][]float64

// EventSample names the samples of a counted event of a test:
// "maps/hash/lookup [cycles/run]".
func EventSample(test, event string) string { return test + " [" + event + "/run]" }

// SamplesOf extracts the measurements of every test that ran, and of each
// event counted.
func SamplesOf(rep *Report) Samples {
	s := Samples{}
	for _, r := range rep.Results {
		if ms := r.Measurements(); len(ms) > 0 {
			s[r.Name] = ms
		}
		for e := range r.Events {
			if v := r.EventMeasurements(e); len(v) > 0 {
				s[EventSample(r.Name, e)] = v
			}
		}
	}
	return s
}

// ReadSamples reads a results file: a JSON report, or the Go benchmark
// format (ours, or any file benchstat reads, using its ns/op values).
func ReadSamples(path string) (Samples, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := parseSamples(b, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: %s: no results in it", ErrBadConfig, path)
	}
	return s, nil
}

func parseSamples(b []byte, name string) (Samples, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		rep, err := ReadJSON(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return SamplesOf(rep), nil
	}
	s := Samples{}
	rd := benchfmt.NewReader(bytes.NewReader(b), name)
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			continue // config lines, syntax errors in unrelated lines
		}
		v, ok := res.Value("ns/op")
		if !ok {
			v, ok = res.Value("sec/op")  // benchfmt normalizes ns/op to sec/op
			v = math.Round(v*1e15) / 1e6 // back to ns without float dust
		}
		n := testName(string(res.Name.Full()))
		if ok {
			s[n] = append(s[n], v)
		}
		for _, val := range res.Values {
			if e, isEvent := strings.CutSuffix(val.Unit, "/op"); isEvent && val.Unit != "ns/op" && val.Unit != "sec/op" {
				k := EventSample(n, e)
				s[k] = append(s[k], val.Value)
			}
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Delta is the comparison of one test in two runs: medians with their 95%
// confidence intervals and a Mann-Whitney U test, as benchstat does.
type Delta struct {
	Test      string  `json:"test"`
	Base      float64 `json:"base_ns"`
	New       float64 `json:"new_ns"`
	BaseRange string  `json:"base_ci"`
	NewRange  string  `json:"new_ci"`
	// Pct is the change of the median in percent (+ is slower).
	Pct float64 `json:"delta_pct"`
	P   float64 `json:"p"`
	N1  int     `json:"n_base"`
	N2  int     `json:"n_new"`
	// Significant is P < alpha and a change of at least the comparison's
	// minimum: the runs differ beyond noise. Two runs of the same build on
	// one machine drift by a percent or two between runs, which a rank
	// test with tight samples calls significant; the minimum keeps that
	// drift from being reported as a change.
	Significant bool     `json:"significant"`
	Warnings    []string `json:"warnings,omitempty"`
}

// Comparison is the result of comparing two runs.
type Comparison struct {
	Alpha       float64  `json:"alpha"`
	MinDeltaPct float64  `json:"min_delta_pct"`
	Deltas      []Delta  `json:"deltas"`
	OnlyOld     []string `json:"only_base,omitempty"`
	OnlyNew     []string `json:"only_new,omitempty"`
}

// DefaultMinDeltaPct is the smallest change Compare reports: above the
// run-to-run drift we measure on one machine (1-3%).
const DefaultMinDeltaPct = 5

// Compare compares every test present in both runs, reporting changes of
// DefaultMinDeltaPct or more.
func Compare(base, cur Samples) Comparison { return CompareMin(base, cur, DefaultMinDeltaPct) }

// CompareMin compares every test present in both runs; a change smaller
// than minPct percent is never significant.
func CompareMin(base, cur Samples, minPct float64) Comparison {
	th := benchmath.DefaultThresholds
	c := Comparison{Alpha: th.CompareAlpha, MinDeltaPct: minPct}
	for _, name := range sortedKeys(base) {
		nv, ok := cur[name]
		if !ok {
			c.OnlyOld = append(c.OnlyOld, name)
			continue
		}
		b := benchmath.NewSample(append([]float64(nil), base[name]...), &th)
		n := benchmath.NewSample(append([]float64(nil), nv...), &th)
		bs := benchmath.AssumeNothing.Summary(b, 0.95)
		ns := benchmath.AssumeNothing.Summary(n, 0.95)
		cmp := benchmath.AssumeNothing.Compare(b, n)
		d := Delta{
			Test: name, Base: bs.Center, New: ns.Center,
			BaseRange: bs.PctRangeString(), NewRange: ns.PctRangeString(),
			P: cmp.P, N1: cmp.N1, N2: cmp.N2,
			Significant: cmp.P < cmp.Alpha,
		}
		if bs.Center != 0 {
			d.Pct = (ns.Center/bs.Center - 1) * 100
		} else if ns.Center != 0 {
			d.Pct = math.Inf(1)
		}
		d.Significant = d.Significant && math.Abs(d.Pct) >= minPct
		for _, w := range append(append(bs.Warnings, ns.Warnings...), cmp.Warnings...) {
			d.Warnings = append(d.Warnings, w.Error())
		}
		c.Deltas = append(c.Deltas, d)
	}
	for _, name := range sortedKeys(cur) {
		if _, ok := base[name]; !ok {
			c.OnlyNew = append(c.OnlyNew, name)
		}
	}
	return c
}

// Regressions returns the significant slowdowns of more than pct percent.
func (c Comparison) Regressions(pct float64) []Delta {
	var out []Delta
	for _, d := range c.Deltas {
		if d.Significant && d.Pct > pct {
			out = append(out, d)
		}
	}
	return out
}

// WriteComparison writes the comparison as benchstat lays it out: "~"
// where the difference is not significant.
func WriteComparison(w io.Writer, c Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "test\tbase ns\t\tnew ns\t\tdelta\t")
	for _, d := range c.Deltas {
		delta := "~"
		if d.Significant {
			delta = fmt.Sprintf("%+.2f%%", d.Pct)
		}
		note := fmt.Sprintf("(p=%.3f n=%d+%d)", d.P, d.N1, d.N2)
		if len(d.Warnings) > 0 {
			note += " ¹"
		}
		fmt.Fprintf(tw, "%s\t%.1f\t±%s\t%.1f\t±%s\t%s %s\t\n", d.Test, d.Base, d.BaseRange, d.New, d.NewRange, delta, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var warn []string
	for _, d := range c.Deltas {
		for _, x := range d.Warnings {
			warn = append(warn, d.Test+": "+x)
		}
	}
	sort.Strings(warn)
	if len(warn) > 0 {
		fmt.Fprintln(w, "¹", strings.Join(uniq(warn), "\n¹ "))
	}
	if len(c.OnlyOld) > 0 {
		fmt.Fprintln(w, "only in base:", strings.Join(c.OnlyOld, ", "))
	}
	if len(c.OnlyNew) > 0 {
		fmt.Fprintln(w, "only in new:", strings.Join(c.OnlyNew, ", "))
	}
	return nil
}

func uniq(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
