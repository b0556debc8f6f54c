package query

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// Hooks builds GET /v1/hooks: what each hook's machinery cost over the
// continuous windows wholly in [since, until], charged to the loaded
// programs attached where it fires, per run and beside their run time
// over the windows' span; only the hooks ref's program is attached to
// where ref is set.
func (q *Query) Hooks(ref string, since, until time.Time) (api.Hooks, error) {
	out := api.Hooks{Since: since, Until: until, Rows: []api.HookRow{}}
	var only *Instance
	if ref != "" {
		in, err := q.ResolveOne(ref)
		if err != nil {
			return out, err
		}
		only = &in
	}
	tr, err := q.Triggered.Triggers(since, until)
	if err != nil {
		return out, err
	}
	out.Windows, out.DurationNs = tr.Windows, tr.Duration.Nanoseconds()
	from, to := tr.Start, tr.Start.Add(tr.Duration) // continuous windows: no gaps
	attached := q.attachedByHook(tr.Hooks, from, to)
	for hook, c := range tr.Hooks {
		progs := attached[hook]
		if only != nil && !slices.ContainsFunc(progs, func(p api.HookProgram) bool { return p.ID == only.Rec.Key.ID }) {
			continue
		}
		row := api.HookRow{Hook: hook, Samples: c.Samples, CPUNs: c.Nanos, Programs: []api.HookProgram{}}
		if tr.Duration > 0 {
			row.CPUPercent = 100 * float64(c.Nanos) / float64(tr.Duration.Nanoseconds())
		}
		var runs, runTime uint64
		for _, p := range progs {
			p.Runs, p.RunTimeNs = q.countersOver(store.InstanceKey{Boot: q.Boot, ID: p.ID}, from, to)
			runs, runTime = runs+p.Runs, runTime+p.RunTimeNs
			row.Programs = append(row.Programs, p)
		}
		if runs > 0 {
			v := float64(c.Nanos) / float64(runs)
			row.NsPerRun = &v
		}
		if runTime > 0 {
			v := float64(c.Nanos) / float64(runTime)
			row.RunTimeRatio = &v
		}
		out.Rows = append(out.Rows, row)
	}
	sort.Slice(out.Rows, func(i, j int) bool {
		if out.Rows[i].CPUNs != out.Rows[j].CPUNs {
			return out.Rows[i].CPUNs > out.Rows[j].CPUNs
		}
		return out.Rows[i].Hook < out.Rows[j].Hook // rows come from a map
	})
	if len(out.Rows) == 0 && only != nil {
		return out, fmt.Errorf("%w: no CPU profile sample landed in the hooks %q is attached to between %s and %s (%d profile windows), or its hooks are of a kind whose cost cannot be told apart (XDP, TC: docs/triggers.md)",
			errs.NoData, ref, since.Format(time.RFC3339), until.Format(time.RFC3339), tr.Windows)
	}
	return out, nil
}

// attachedByHook lists, for each hook in hooks, the programs of this boot
// loaded at some time in [from, to] and attached where it fires
// (stats_clock: every program): the loaded ones with their attach points
// now, the unloaded ones with those the store kept. A damaged store
// leaves the loaded ones alone.
func (q *Query) attachedByHook(hooks map[string]profile.HookCost, from, to time.Time) map[string][]api.HookProgram {
	type prog struct {
		name   string
		attach []collectors.AttachPoint
	}
	progs := map[uint32]prog{}
	q.Sampler.Read(func(v sampler.View) {
		for id, p := range v.Programs() {
			m := p.Meta()
			progs[id] = prog{m.Name, m.Attach}
		}
	})
	if recs, err := q.Store.Programs(); err == nil {
		during := map[uint32]bool{}
		for _, r := range recs {
			if r.Key.Boot != q.Boot || r.FirstSeen.After(to) || (!r.Loaded() && r.UnloadedAt.Before(from)) {
				continue
			}
			during[r.Key.ID] = true
			if _, loaded := progs[r.Key.ID]; loaded {
				continue
			}
			var m collectors.Meta
			if len(r.Meta) > 0 {
				json.Unmarshal(r.Meta, &m) // a bad record: no attach points
			}
			progs[r.Key.ID] = prog{r.Name, m.Attach}
		}
		for id := range progs {
			if !during[id] {
				delete(progs, id) // loaded after the windows
			}
		}
	}
	out := map[string][]api.HookProgram{}
	for id, p := range progs {
		for hook := range hooks {
			if firesAt(hook, p.attach) {
				out[hook] = append(out[hook], api.HookProgram{ID: id, Name: p.name})
			}
		}
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	}
	return out
}

// probeFires are, for each probe hook, the kinds of perf_event probe it
// fires for.
var probeFires = map[string]map[string]bool{
	"kprobe":            {"kprobe": true, "kretprobe": true},
	"kretprobe":         {"kretprobe": true},
	profile.HookRethook: {"kretprobe": true},
	"uprobe":            {"uprobe": true, "uretprobe": true},
	"uretprobe":         {"uretprobe": true},
}

// firesAt says whether a program with these attach points runs from hook
// (profile.hookOf's names).
func firesAt(hook string, attach []collectors.AttachPoint) bool {
	if hook == "stats_clock" {
		return true
	}
	for _, a := range attach {
		tp := strings.TrimPrefix(a.Target, "tracepoint ")
		syscallTP := a.Type == "perf_event" && strings.HasPrefix(a.Target, "tracepoint sys_")
		switch {
		case hook == "syscall_enter" && syscallTP && strings.HasPrefix(tp, "sys_enter_"),
			hook == "syscall_exit" && syscallTP && strings.HasPrefix(tp, "sys_exit_"),
			hook == profile.HookSyscallSlowPath && (syscallTP || tp == "sys_enter" || tp == "sys_exit"),
			hook == "raw_tp:"+tp && a.Type != "perf_event",
			hook == "tracepoint:"+tp && a.Type == "perf_event" && !syscallTP,
			(hook == "kprobe_multi" || hook == profile.HookRethook) && a.Type == "kprobe_multi":
			return true
		}
		// A probe's perf_event target is "<kind> <function or file>"
		// (collectors' perfEventTarget, PerfEventAttach), or the kind
		// alone where the kernel names nothing. Every kretprobe enters
		// through a kprobe and returns through the rethook, and every
		// uretprobe takes a uprobe's breakpoint at entry: those hooks
		// are theirs too.
		if kind, _, _ := strings.Cut(a.Target, " "); a.Type == "perf_event" && probeFires[hook][kind] {
			return true
		}
		// A tracing link's target is "<kind> <function>" (collectors'
		// tracing_target.go), the hook "trampoline:<function>".
		if fn, ok := strings.CutPrefix(hook, profile.HookTrampoline); ok && a.Type == "tracing" {
			if _, target, _ := strings.Cut(a.Target, " "); target == fn {
				return true
			}
		}
	}
	return false
}

// countersOver is an instance's runs and run time between the stored
// samples nearest from and to, 0 where it has fewer than two or its
// counters went back (api.DeltaBetween).
func (q *Query) countersOver(k store.InstanceKey, from, to time.Time) (runs, runTime uint64) {
	pts, err := q.Store.Series(k, from, to)
	if err != nil || len(pts) < 2 {
		return 0, 0
	}
	a, b := pts[0], pts[len(pts)-1]
	d, ok := api.DeltaBetween(PointCounters(a), PointCounters(b), b.Time.Sub(a.Time))
	if !ok {
		return 0, 0
	}
	return uint64(d.Runs), uint64(d.Ns)
}
