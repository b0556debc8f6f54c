package profile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// estimateProfile is a profile as Build makes it, as a literal: value type
// vt, and per sample (prog_id label, samples, value).
func estimateProfile(vt *profile.ValueType, period int64, samples ...[3]int64) *profile.Profile {
	fn := &profile.Function{ID: 1, Name: "f"}
	loc := &profile.Location{ID: 1, Address: 0x10, Line: []profile.Line{{Function: fn}}}
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "samples", Unit: "count"}, vt},
		DefaultSampleType: vt.Type,
		PeriodType:        vt,
		Period:            period,
		DurationNanos:     int64(time.Second),
		Function:          []*profile.Function{fn},
		Location:          []*profile.Location{loc},
	}
	for _, s := range samples {
		ps := &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{s[1], s[2]}, Label: map[string][]string{}}
		if s[0] != 0 {
			ps.Label[LabelProgID] = []string{itoa(map[uint32]string{}, uint32(s[0]))}
		}
		p.Sample = append(p.Sample, ps)
	}
	return p
}

// TestProgramEstimatesCPUClock: at 99 Hz each cpu-clock sample stands for
// 1e9/99 ns; a program's estimate is its samples times that, the samples of
// one program spread over several stacks add up, and samples without a
// program (no prog_id) count for none.
func TestProgramEstimatesCPUClock(t *testing.T) {
	const period = int64(time.Second) / 99
	p := estimateProfile(&profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, period,
		[3]int64{7, 150, 150 * period},
		[3]int64{7, 50, 50 * period},
		[3]int64{9, 3, 3 * period}, // a tail-call target: its own samples
		[3]int64{0, 40, 40 * period},
	)
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	est, event, err := ProgramEstimates(p)
	if err != nil || event != "cpu" {
		t.Fatalf("ProgramEstimates: %v, %q", err, event)
	}
	if got, want := est[7], (ProgramEstimate{Samples: 200, Total: float64(200 * period)}); got != want {
		t.Errorf("prog 7: %+v, want %+v", got, want)
	}
	if got := est[9]; got.Samples != 3 || got.Total != float64(3*period) {
		t.Errorf("prog 9: %+v", got)
	}
	if len(est) != 2 {
		t.Errorf("estimates for %d programs, want 2: %v", len(est), est)
	}
	// Without the value column, samples × Period.
	p.SampleType = p.SampleType[:1]
	p.DefaultSampleType = ""
	for _, s := range p.Sample {
		s.Value = s.Value[:1]
	}
	est, event, err = ProgramEstimates(p)
	if err != nil || event != "cpu" || est[7].Total != float64(200*period) {
		t.Errorf("samples × period: %+v, %q, %v", est[7], event, err)
	}
	p.Period = 0
	if _, _, err := ProgramEstimates(p); !errors.Is(err, ErrNoEventValue) {
		t.Errorf("no value and no period: %v, want ErrNoEventValue", err)
	}
}

// TestProgramEstimatesCycles: a hardware event sampled in frequency mode
// has a period per sample, which Build sums into the event value: the
// estimate is that sum, not samples × a fixed period (Period is 0).
func TestProgramEstimatesCycles(t *testing.T) {
	p := estimateProfile(&profile.ValueType{Type: "cycles", Unit: "count"}, 0,
		[3]int64{5, 2, 1_000_000 + 3_000_000}, // periods vary sample to sample
		[3]int64{5, 1, 2_500_000},
		[3]int64{6, 1, 10},
	)
	est, event, err := ProgramEstimates(p)
	if err != nil || event != "cycles" {
		t.Fatalf("ProgramEstimates: %v, %q", err, event)
	}
	if got := est[5]; got.Samples != 3 || got.Total != 6_500_000 {
		t.Errorf("prog 5: %+v, want 3 samples, 6.5M cycles", got)
	}
	if got := est[6]; got.Samples != 1 || got.Total != 10 {
		t.Errorf("prog 6: %+v", got)
	}
}

// TestBuildHardwareEvents: captures of every hardware event build into
// profiles named after the event, counted in its units, whose estimates
// are the sums of the samples' periods.
func TestBuildHardwareEvents(t *testing.T) {
	sym := NewSymbolizer(SymbolizerConfig{})
	for _, ev := range []perfevent.Event{perfevent.Cycles, perfevent.Instructions, perfevent.LLCMisses} {
		stack := []uint64{0xffffffff81000000}
		c := &Capture{Event: ev, Hz: 99, CPUs: 1, Start: time.Unix(100, 0), Duration: time.Second,
			Samples: []Sample{{Period: 1000, Stack: stack}, {Period: 3000, Stack: stack}}}
		p, err := Build(c, sym, BuildOptions{All: true})
		if err != nil {
			t.Fatalf("%v: %v", ev, err)
		}
		if vt := p.SampleType[1]; vt.Type != ev.String() || vt.Unit != "count" || p.Period != 0 || p.DefaultSampleType != ev.String() {
			t.Errorf("%v: sample type %v, period %d, default %q", ev, vt, p.Period, p.DefaultSampleType)
		}
		var total int64
		for _, s := range p.Sample {
			total += s.Value[1]
		}
		if total != 4000 {
			t.Errorf("%v: value total %d, want 4000", ev, total)
		}
	}
}

// TestBuildMultiplexed: a hardware event on the PMU for only part of the
// window (another tool's events took turns with it) has its values scaled
// by time enabled / running, and the profile says so.
func TestBuildMultiplexed(t *testing.T) {
	stack := []uint64{0xffffffff81000000}
	c := &Capture{Event: perfevent.Cycles, Hz: 99, CPUs: 1, Start: time.Unix(100, 0), Duration: time.Second,
		Samples: []Sample{{Period: 1000, Stack: stack}, {Period: 3000, Stack: stack}}, RunningShare: 0.25}
	p, err := Build(c, NewSymbolizer(SymbolizerConfig{}), BuildOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[1]
	}
	if total != 16000 {
		t.Errorf("value total %d, want 4000 / 0.25 = 16000", total)
	}
	if len(p.Comments) != 2 || !strings.Contains(p.Comments[1], "multiplexed: cycles was on the PMU 25% of the window") {
		t.Errorf("comments %q", p.Comments)
	}
	c.RunningShare = 1 // never scaled when the event ran the whole window
	if p, _ := Build(c, NewSymbolizer(SymbolizerConfig{}), BuildOptions{All: true}); len(p.Comments) != 1 {
		t.Errorf("not multiplexed: comments %q", p.Comments)
	}
}
