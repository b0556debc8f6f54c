package profile

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/google/pprof/profile"
)

// Change is one program, function or source line's CPU in two profiles,
// as a percentage of one CPU over each profile's duration.
type Change struct {
	Level         string // "program", "function" or "line"
	Name          string
	Before, After float64
}

// Changes returns the programs, functions and source lines of the
// innermost BPF frame of each sample whose CPU changed most from before to
// after, grown first (by how much), then shrunk, at most n of each level.
// Functions and lines count only samples of program prog (by name) when
// prog is set; programs are listed host-wide, so that a neighbour (or a
// tail-call target, which bpf_stats charges to its entry) shows too.
// A profile's value is its event value (cpu/nanoseconds for cpu-clock);
// both must have one and a duration. Percentages are of one CPU, so a line
// that runs at a fixed rate keeps its figure when another line grows.
func Changes(before, after *profile.Profile, n int, prog string) ([]Change, error) {
	b, err := cpuByFrame(before, prog)
	if err != nil {
		return nil, err
	}
	a, err := cpuByFrame(after, prog)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, level := range []string{"program", "function", "line"} {
		var cs []Change
		for name := range union(b[level], a[level]) {
			cs = append(cs, Change{Level: level, Name: name, Before: b[level][name], After: a[level][name]})
		}
		sort.Slice(cs, func(i, j int) bool {
			di, dj := cs[i].After-cs[i].Before, cs[j].After-cs[j].Before
			if di != dj {
				return di > dj
			}
			return cs[i].Name < cs[j].Name
		})
		out = append(out, cs[:min(n, len(cs))]...)
	}
	return out, nil
}

// cpuByFrame sums each level's share of one CPU over p's duration.
func cpuByFrame(p *profile.Profile, prog string) (map[string]map[string]float64, error) {
	vi := eventValue(p)
	if vi < 0 {
		return nil, ErrNoEventValue
	}
	if p.DurationNanos <= 0 {
		return nil, fmt.Errorf("%w: profile has no duration", ErrNoEventValue)
	}
	out := map[string]map[string]float64{"program": {}, "function": {}, "line": {}}
	for _, s := range p.Sample {
		loc := innermostBPF(s)
		if loc == nil || vi >= len(s.Value) {
			continue
		}
		pct := 100 * float64(s.Value[vi]) / float64(p.DurationNanos)
		names := s.Label[LabelProgName]
		if len(names) == 1 {
			out["program"][names[0]] += pct
		}
		if prog != "" && (len(names) != 1 || names[0] != prog) {
			continue
		}
		if len(loc.Line) == 0 || loc.Line[0].Function == nil {
			continue
		}
		ln := loc.Line[0]
		out["function"][ln.Function.Name] += pct
		if ln.Function.Filename != "" && ln.Line > 0 {
			out["line"][fmt.Sprintf("%s %s:%d", ln.Function.Name, filepath.Base(ln.Function.Filename), ln.Line)] += pct
		}
	}
	return out, nil
}

// eventValue is the index of p's event value: the sample type that is not
// a count of samples.
func eventValue(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if st.Type != "samples" {
			return i
		}
	}
	return -1
}

func innermostBPF(s *profile.Sample) *profile.Location {
	for _, loc := range s.Location {
		if loc.Mapping != nil && loc.Mapping.File == MappingBPF {
			return loc
		}
	}
	return nil
}

func union(a, b map[string]float64) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
