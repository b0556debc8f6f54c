package profile

import (
	"errors"
	"testing"

	"github.com/google/pprof/profile"
)

// changesProfile is a cpu-clock profile of 1 s: each sample is one BPF
// frame of program prog, function fn at line, with ns of CPU.
func changesProfile(samples ...struct {
	prog, fn string
	line     int64
	ns       int64
}) *profile.Profile {
	m := &profile.Mapping{ID: 1, File: MappingBPF}
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DurationNanos: 1e9,
		Mapping:       []*profile.Mapping{m},
	}
	for i, s := range samples {
		fn := &profile.Function{ID: uint64(i + 1), Name: s.fn, Filename: "/src/work.c"}
		loc := &profile.Location{ID: uint64(i + 1), Mapping: m, Line: []profile.Line{{Function: fn, Line: s.line}}}
		p.Function = append(p.Function, fn)
		p.Location = append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{1, s.ns}, Label: map[string][]string{LabelProgName: {s.prog}}})
	}
	return p
}

type frame = struct {
	prog, fn string
	line     int64
	ns       int64
}

func TestChanges(t *testing.T) {
	before := changesProfile(frame{"p", "base", 21, 70e6}, frame{"other", "spin", 5, 10e6})
	after := changesProfile(frame{"p", "base", 21, 72e6}, frame{"p", "extra", 31, 35e6}, frame{"other", "spin", 5, 50e6})
	got, err := Changes(before, after, 1, "p")
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Level: "program", Name: "other", Before: 1, After: 5}, // host-wide: the neighbour grew most
		{Level: "function", Name: "extra", Before: 0, After: 3.5},
		{Level: "line", Name: "extra work.c:31", Before: 0, After: 3.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := Changes(&profile.Profile{DurationNanos: 1}, after, 1, ""); !errors.Is(err, ErrNoEventValue) {
		t.Errorf("a profile without values: %v, want ErrNoEventValue", err)
	}
}
