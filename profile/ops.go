package profile

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/google/pprof/profile"
)

// Marshal encodes p as a gzipped pprof protobuf, the form to store and
// serve.
func Marshal(p *profile.Profile) ([]byte, error) {
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		return nil, fmt.Errorf("encode profile: %w", err)
	}
	return buf.Bytes(), nil
}

// Parse reads a pprof profile, gzipped or not. Input that is not a valid
// pprof profile fails with ErrNotProfile.
func Parse(r io.Reader) (*profile.Profile, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read profile: %w", err)
	}
	return ParseData(b)
}

// ParseData is Parse on bytes.
func ParseData(b []byte) (*profile.Profile, error) {
	p, err := profile.ParseData(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotProfile, err)
	}
	// The protobuf decoder accepts some garbage as an empty profile.
	if len(p.SampleType) == 0 {
		return nil, fmt.Errorf("%w: no sample types", ErrNotProfile)
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotProfile, err)
	}
	return p, nil
}

// Merge adds profiles up, as `pprof` does with several sources: samples
// with the same stack and labels are summed and durations add up. The
// profiles must have the same sample types. Merge of none fails with
// ErrNoProfiles.
func Merge(ps ...*profile.Profile) (*profile.Profile, error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("merge: %w", ErrNoProfiles)
	}
	p, err := profile.Merge(ps)
	if err != nil {
		return nil, fmt.Errorf("merge profiles: %w", err)
	}
	return p, nil
}

// BaseLabel is the label pprof's -diff_base puts on the base profile's
// samples, which it shows apart from the new ones.
const BaseLabel = "pprof::base"

// Diff returns the profile `pprof -diff_base=base new` looks at: base's
// samples with their values negated and labelled pprof::base=true, merged
// with new's. Opened with pprof, it shows what changed from base to new;
// positive values grew. Neither argument is modified.
func Diff(base, new *profile.Profile) (*profile.Profile, error) {
	b := base.Copy()
	b.SetLabel(BaseLabel, []string{"true"})
	b.Scale(-1)
	p, err := profile.Merge([]*profile.Profile{new, b})
	if err != nil {
		return nil, fmt.Errorf("diff profiles: %w", err)
	}
	return p, nil
}

// SampleCount is how many samples p holds: the first value of each of
// its samples (their count), summed.
func SampleCount(p *profile.Profile) int64 {
	var n int64
	for _, s := range p.Sample {
		if len(s.Value) > 0 {
			n += s.Value[0]
		}
	}
	return n
}

// ProgramShares returns, for each program id in p's prog_id labels, the
// CPU time its samples stand for as a percentage of one CPU over p's
// duration (the bpftop convention: 200 means two CPUs busy). A sample
// counts for the program of its innermost BPF frame, so tail-call targets
// get their own share, which bpf_stats charges to the entry program. It
// fails with ErrNoCPUValue when p has no cpu/nanoseconds values, and
// returns an empty map when p has no duration.
func ProgramShares(p *profile.Profile) (map[uint32]float64, error) {
	ns, err := ProgramNanos(p)
	if err != nil {
		return nil, err
	}
	shares := make(map[uint32]float64, len(ns))
	if p.DurationNanos <= 0 {
		return shares, nil
	}
	for id, v := range ns {
		shares[id] = 100 * float64(v) / float64(p.DurationNanos)
	}
	return shares, nil
}

// ProgramNanos returns, for each program id in p's prog_id labels, the
// nanoseconds of CPU its samples stand for (attributed as ProgramShares
// does: tail-call targets get their own). It fails with ErrNoCPUValue when
// p has no cpu/nanoseconds values.
func ProgramNanos(p *profile.Profile) (map[uint32]int64, error) {
	vi, _ := cpuAndSamples(p)
	if vi < 0 {
		return nil, ErrNoCPUValue
	}
	ns := map[uint32]int64{}
	for _, s := range p.Sample {
		id, ok := sampleProg(s)
		if !ok || vi >= len(s.Value) {
			continue
		}
		ns[id] += s.Value[vi]
	}
	return ns, nil
}

// ProgramEstimate is what one program's samples in a profile stand for.
type ProgramEstimate struct {
	// Samples is how many samples landed in the program.
	Samples int64
	// Total is the event count those samples stand for: the sum of their
	// periods, samples × period when the period is fixed. For cpu-clock it
	// is nanoseconds of CPU.
	Total float64
}

// ProgramEstimates returns, for each program id in p's prog_id labels, how
// many samples landed in it and the event total they stand for, and the
// profile's event type ("cpu" for cpu-clock, else the hardware event's
// name). A sample counts for the program of its innermost BPF frame, so a
// tail-call target gets its own estimate. The total comes from the event
// value (the sample type that is not samples/count); a profile without one
// but with a fixed Period counts samples × Period. Without either it fails
// with ErrNoEventValue.
func ProgramEstimates(p *profile.Profile) (map[uint32]ProgramEstimate, string, error) {
	si, vi := -1, -1
	for i, st := range p.SampleType {
		switch {
		case st.Type == "samples" && st.Unit == "count":
			si = i
		case vi < 0 || st.Type == p.DefaultSampleType:
			vi = i
		}
	}
	event := ""
	switch {
	case vi >= 0:
		event = p.SampleType[vi].Type
	case si >= 0 && p.Period > 0 && p.PeriodType != nil:
		event = p.PeriodType.Type
	default:
		return nil, "", ErrNoEventValue
	}
	out := map[uint32]ProgramEstimate{}
	for _, s := range p.Sample {
		id, ok := sampleProg(s)
		if !ok {
			continue
		}
		e := out[id]
		n := int64(1)
		if si >= 0 && si < len(s.Value) {
			n = s.Value[si]
		}
		e.Samples += n
		if vi >= 0 && vi < len(s.Value) {
			e.Total += float64(s.Value[vi])
		} else {
			e.Total += float64(n) * float64(p.Period)
		}
		out[id] = e
	}
	return out, event, nil
}

// sampleProg is the program a built sample's prog_id label names; false
// for samples outside any program (hook samples, All's kernel samples)
// and programs known by tag only.
func sampleProg(s *profile.Sample) (uint32, bool) {
	ids := s.Label[LabelProgID]
	if len(ids) != 1 {
		return 0, false
	}
	id, err := strconv.ParseUint(ids[0], 10, 32)
	return uint32(id), err == nil
}
