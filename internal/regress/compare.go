// Package regress decides whether a program's ns/run changed: between two
// versions of it (a reload with a new tag), from per-interval samples taken
// at matched load. It is pure maths: the daemon feeds it samples and stores
// what it finds.
package regress

import (
	"math"
	"sort"
	"time"

	"golang.org/x/perf/benchmath"

	"github.com/bpfperf/bpfperf/api"
)

// Kinds of findings.
const (
	KindRegression  = "regression"
	KindImprovement = "improvement"
	KindShift       = "shift"
)

// Sample is one sampling interval of one program: its average ns/run over
// the interval and how many runs per second it made.
type Sample struct {
	At         time.Time
	NsPerRun   float64
	RunsPerSec float64
}

// Config holds the thresholds of a comparison.
type Config struct {
	// MinChange is the least relative change of the median ns/run that
	// counts (0.10 = 10%): smaller but significant shifts are not reported.
	MinChange float64
	// Alpha is the Mann-Whitney U test's significance level.
	Alpha float64
	// Window is how much history each side of a change must hold before
	// deciding.
	Window time.Duration
	// LoadBand is how far (as a factor) an interval's runs/s may be from
	// the after side's median runs/s and still be compared: 1.5 keeps
	// intervals between m/1.5 and m*1.5. A change of traffic alone moves
	// ns/run (caches, batching); comparing like load with like keeps it
	// from reading as a regression.
	LoadBand float64
	// MinSamples is the least number of load-matched intervals each side
	// needs.
	MinSamples int
	// ShiftWindow is each side of a same-version comparison (shift.go);
	// 0 turns shift detection off.
	ShiftWindow time.Duration
}

// Defaults.
const (
	DefaultMinChange  = 0.10
	DefaultAlpha      = 0.05
	DefaultWindow     = 10 * time.Minute
	DefaultLoadBand   = 1.5
	DefaultMinSamples = 8
)

// DefaultConfig is the daemon's default.
func DefaultConfig() Config {
	return Config{MinChange: DefaultMinChange, Alpha: DefaultAlpha, Window: DefaultWindow, LoadBand: DefaultLoadBand, MinSamples: DefaultMinSamples, ShiftWindow: DefaultShiftWindow}
}

// Result is a comparison of two sides. Kind is empty when there is no
// finding; Undecided says why no decision could be made.
type Result struct {
	Kind string `json:"kind,omitempty"`
	api.Comparison
}

// Compare tests whether after's ns/run differs from before's, using only
// intervals whose load is within cfg.LoadBand of after's median load.
func Compare(before, after []Sample, cfg Config) Result {
	r := Result{Comparison: api.Comparison{Alpha: cfg.Alpha, MinChange: cfg.MinChange}}
	if len(after) == 0 || len(before) == 0 {
		r.Undecided = "no samples on one side"
		return r
	}
	load := Median(loads(after))
	band := max(cfg.LoadBand, 1)
	r.LoadLo, r.LoadHi = load/band, load*band
	b, a := inBand(before, r.LoadLo, r.LoadHi), inBand(after, r.LoadLo, r.LoadHi)
	r.NBefore, r.NAfter = len(b), len(a)
	if len(b) < cfg.MinSamples || len(a) < cfg.MinSamples {
		r.Undecided = "too few intervals at matched load"
		return r
	}
	th := &benchmath.Thresholds{CompareAlpha: cfg.Alpha}
	sb, sa := benchmath.NewSample(b, th), benchmath.NewSample(a, th)
	cmp := benchmath.AssumeNothing.Compare(sb, sa)
	r.P = cmp.P
	// Each median's interval at sqrt(0.95) makes the ratio's interval
	// cover at least 95%.
	conf := math.Sqrt(0.95)
	mb, ma := benchmath.AssumeNothing.Summary(sb, conf), benchmath.AssumeNothing.Summary(sa, conf)
	r.BeforeNs, r.AfterNs = mb.Center, ma.Center
	if mb.Center <= 0 || mb.Lo <= 0 {
		r.Undecided = "before side ran in no time"
		return r
	}
	r.Ratio, r.RatioLo, r.RatioHi = ma.Center/mb.Center, ma.Lo/mb.Hi, ma.Hi/mb.Lo
	r.Significant = cmp.P < cfg.Alpha
	switch {
	case !r.Significant:
	case r.Ratio >= 1+cfg.MinChange:
		r.Kind = KindRegression
	case r.Ratio <= 1/(1+cfg.MinChange):
		r.Kind = KindImprovement
	}
	return r
}

func loads(s []Sample) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = x.RunsPerSec
	}
	return out
}

// inBand returns the ns/run of the samples whose load is in [lo, hi].
func inBand(s []Sample, lo, hi float64) []float64 {
	var out []float64
	for _, x := range s {
		if x.RunsPerSec >= lo && x.RunsPerSec <= hi {
			out = append(out, x.NsPerRun)
		}
	}
	return out
}

// Median is the middle of v (the mean of the two middle values for an
// even count), 0 for none; v is left as it is.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
