package stat

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/bpfperf/bpfperf/bench"
)

// Key is how runs of the command line up: a program's type, full name (or
// tag, for a program without a name) and instance among the programs
// sharing them. Its ids differ from run to run. Programs sharing a name
// (execsnoop's enter and exit programs share the kernel's cut name
// tracepoint__sys; one object loaded twice shares full names too) are
// never summed into one result.
//
// The tag is left out: a command that rebuilds and reloads its program
// gets a new tag for what is the same program.
type Key struct {
	Type, Name string
	Instance   int // 1 and up
}

// KeyOf is p's key.
func KeyOf(p Program) Key {
	k := Key{p.Type, p.Name, max(p.Instance, 1)}
	if p.Name == "" {
		k.Name = "tag=" + p.Tag
	}
	return k
}

// TestName is the result name of a key: "stat/xdp/xdp_pass", then
// "stat/xdp/xdp_pass#2" for a second program of that type and name.
func (k Key) TestName() string {
	name := "stat/" + k.Type + "/" + k.Name
	if k.Instance > 1 {
		name += fmt.Sprintf("#%d", k.Instance)
	}
	return name
}

// Report turns the measurements of the runs into a bench report: one
// result per program key (one per program in each run), its measurements the ns/run of each run, and
// its macro figures. A program that did not run in some run counts 0
// runs there (and has no ns/run for it). sampled, if set, gives each
// run's sampled CPU share per program id (--profile).
func Report(ms []Measurement, run bench.MacroRun, sampled []map[uint32]float64) *bench.Report {
	rep := &bench.Report{Time: time.Now(), Macro: &run}
	var walls []float64
	for _, m := range ms {
		walls = append(walls, m.Wall.Seconds())
		rep.WallSeconds += m.Wall.Seconds()
		run.ExitCodes = append(run.ExitCodes, m.ExitCode)
	}
	run.Runs = len(ms)
	run.Wall = bench.SpreadOf(walls)

	byKey := map[Key]*bench.Result{}
	var keys []Key
	for i, m := range ms {
		for _, p := range m.Programs {
			k := KeyOf(p)
			r := byKey[k]
			if r == nil {
				r = &bench.Result{Test: bench.Test{Name: k.TestName(), Group: "stat", Entry: p.Name},
					Macro: &bench.MacroResult{Type: k.Type, Name: p.Name, Instance: k.Instance}}
				if p.KernelName != p.Name {
					r.Macro.KernelName = p.KernelName
				}
				r.Macro.PerRun = make([]bench.MacroSample, len(ms))
				for j := range ms {
					r.Macro.PerRun[j].WallSeconds = ms[j].Wall.Seconds()
				}
				byKey[k] = r
				keys = append(keys, k)
			}
			mr := r.Macro
			if !slices.Contains(mr.IDs, p.ID) {
				mr.IDs = append(mr.IDs, p.ID)
			}
			if !slices.Contains(mr.Tags, p.Tag) {
				mr.Tags = append(mr.Tags, p.Tag)
			}
			mr.Loaded = mr.Loaded || p.Loaded
			mr.Unloaded = mr.Unloaded || p.Unloaded
			s := &mr.PerRun[i]
			s.Runs += p.Delta.RunCnt
			s.RunTimeNs += p.Delta.RunTimeNs
			s.RecursionMisses += p.Delta.RecursionMisses
		}
	}
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Instance, b.Instance))
	})
	for _, k := range keys {
		r := byKey[k]
		figures(r, sampled)
		rep.Results = append(rep.Results, *r)
	}
	return rep
}

// figures fills r's spreads and measurements from its per-run deltas.
func figures(r *bench.Result, sampled []map[uint32]float64) {
	mr := r.Macro
	var runs, times, rates, cpu, misses, nsPerRun, share []float64
	for i, s := range mr.PerRun {
		runs = append(runs, float64(s.Runs))
		times = append(times, float64(s.RunTimeNs))
		misses = append(misses, float64(s.RecursionMisses))
		if s.WallSeconds > 0 {
			rates = append(rates, float64(s.Runs)/s.WallSeconds)
			cpu = append(cpu, 100*float64(s.RunTimeNs)/(s.WallSeconds*1e9))
		}
		if s.Runs > 0 {
			nsPerRun = append(nsPerRun, float64(s.RunTimeNs)/float64(s.Runs))
		}
		if i < len(sampled) && sampled[i] != nil {
			v := 0.0
			for _, id := range mr.IDs {
				v += sampled[i][id]
			}
			share = append(share, v)
		}
	}
	mr.Runs, mr.RunTimeNs, mr.RunsPerSecond = bench.SpreadOf(runs), bench.SpreadOf(times), bench.SpreadOf(rates)
	mr.CPUPercent, mr.RecursionMisses = bench.SpreadOf(cpu), bench.SpreadOf(misses)
	if len(share) > 0 {
		s := bench.SpreadOf(share)
		mr.SampledCPUPercent = &s
	}
	r.Repeat = int(math.Round(mr.Runs.Median))
	if len(nsPerRun) == 0 {
		r.Skipped = fmt.Sprintf("did not run (%d instances seen)", len(mr.IDs))
		return
	}
	r.Runs = []bench.CPURun{{CPU: -1, Measurements: nsPerRun, Summary: bench.Summarize(nsPerRun)}}
	r.Summary = bench.Summarize(nsPerRun)
}
