package query

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/profile"
)

// Triggered reads what triggered programs out of the stored continuous
// profile windows, and out of the latest one (profiling.Profiling).
type Triggered interface {
	Triggers(from, to time.Time) (profiling.Triggered, error)
	LastTriggers() (map[uint32][]profile.TriggerCost, time.Duration)
}

// Triggers builds GET /v1/triggers: what triggered the programs ref names
// ("" for all) over the windows wholly in [since, until], only the rows of
// workload where it is set (a workload name, unit, container, pod uid or
// cgroup path). Profiles label programs by this boot's ids, so ref's
// instances of earlier boots have none. A program or workload with no
// samples there is an error that says so, not an empty answer.
func (q *Query) Triggers(ref, workload string, since, until time.Time) (api.Triggers, error) {
	out := api.Triggers{Since: since, Until: until, Rows: []api.TriggerRow{}}
	var only map[uint32]bool
	if ref != "" {
		insts, err := q.Resolve(ref)
		if err != nil {
			return out, err
		}
		only = map[uint32]bool{}
		for _, in := range insts {
			if in.Rec.Key.Boot == q.Boot {
				only[in.Rec.Key.ID] = true
			}
		}
	}
	tr, err := q.Triggered.Triggers(since, until)
	if err != nil {
		return out, err
	}
	out.Windows, out.DurationNs = tr.Windows, tr.Duration.Nanoseconds()
	rows := q.triggerRows(tr.ByProgram, tr.Duration, only)
	q.awaitPods(rows)
	for _, r := range rows {
		if workload == "" || workloadMatches(r, workload) {
			out.Rows = append(out.Rows, r)
		}
	}
	if len(out.Rows) > 0 {
		return out, nil
	}
	over := fmt.Sprintf("between %s and %s (%d profile windows)", since.Format(time.RFC3339), until.Format(time.RFC3339), tr.Windows)
	switch {
	case workload != "":
		return out, fmt.Errorf("%w: %q triggered no sampled run %s: not a workload bpfperf saw (bpfperf owners --triggered lists them)", errs.UnknownWorkload, workload, over)
	case ref != "":
		return out, fmt.Errorf("%w: no CPU profile sample landed in %q %s: it ran too little to be sampled, or not at all", errs.NoData, ref, over)
	}
	return out, nil
}

// LatestTriggers is what triggered each program in the latest continuous
// window, for /metrics; nil before the first.
func (q *Query) LatestTriggers() []api.TriggerRow {
	by, over := q.Triggered.LastTriggers()
	if by == nil {
		return nil
	}
	return q.triggerRows(by, over, nil)
}

// triggerRows makes the rows of by (the programs in only, or all when it
// is nil), costliest program first, each program's costliest trigger
// first; over is the time the samples cover.
func (q *Query) triggerRows(by map[uint32][]profile.TriggerCost, over time.Duration, only map[uint32]bool) []api.TriggerRow {
	progs := q.programsOf(by)
	type prog struct {
		id    uint32
		total int64
	}
	var order []prog
	for id, costs := range by {
		if only != nil && !only[id] {
			continue
		}
		var total int64
		for _, c := range costs {
			total += c.Nanos
		}
		order = append(order, prog{id, total})
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].total != order[j].total {
			return order[i].total > order[j].total
		}
		return order[i].id < order[j].id
	})
	var rows []api.TriggerRow
	for _, p := range order {
		info := progs[p.id]
		for _, c := range resolveUnknown(by[p.id], info) {
			r := triggerRow(p.id, info, c, p.total, over)
			q.namePod(&r)
			rows = append(rows, r)
		}
	}
	return rows
}

// namePod names r's workload by its pod where its cgroup is a container
// the CRI socket has named; the cache answers, so a cgroup of a container
// gone before the daemon asked keeps its ids. pending says the CRI is
// being asked. A container no pod names is named by its runtime's name
// where Containers has one (podman run --name).
func (q *Query) namePod(r *api.TriggerRow) (pending bool) {
	if r.Container == "" || r.Pod != nil {
		return false
	}
	var pod *collectors.Pod
	if q.Pods != nil {
		pod, pending = q.Pods.Lookup(r.Cgroup)
	}
	if pod != nil {
		r.Pod, r.Workload = pod, pod.String()
	} else if q.Containers != nil && !strings.HasPrefix(r.Container, "pod ") {
		if name := q.Containers.Name(r.Cgroup); name != "" {
			r.Container, r.Workload = name, name
		}
	}
	return pending
}

// podWait bounds how long a triggers request waits for the pods of
// containers the CRI is being asked about (those only the profiler has
// seen: no loader or holder), so that a first request names them too.
const podWait = 500 * time.Millisecond

// awaitPods names the rows whose pods were being asked for, waiting at
// most podWait. A request may wait; the sampler and /metrics never do.
func (q *Query) awaitPods(rows []api.TriggerRow) {
	for deadline := time.Now().Add(podWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pending := false
		for i := range rows {
			pending = q.namePod(&rows[i]) || pending
		}
		if !pending {
			return
		}
	}
}

// workloadMatches says whether ref names r's workload: its name, unit,
// container, pod uid, pod (podMatches) or cgroup path.
func workloadMatches(r api.TriggerRow, ref string) bool {
	return ref == r.Workload || ref == r.Unit || ref == r.Container || ref == r.Cgroup || ref == r.Context ||
		(r.Container != "" && strings.HasPrefix(r.Container, "pod "+ref)) || podMatches(r.Pod, ref)
}

// progInfo is what a trigger row shows of its program.
type progInfo struct {
	name    string
	devices []string
	// taskOnly: every hook it is attached to runs in task context only
	// (syscall tracepoints), so a sample whose chain stops at it is the
	// interrupted task's work.
	taskOnly bool
}

func infoOf(m *collectors.Meta) progInfo {
	return progInfo{name: m.Name, devices: devices(m.Attach), taskOnly: taskOnly(m.Attach)}
}

// taskOnly says whether every attach point is a syscall's enter or exit
// tracepoint (perf_event, raw or BTF), which fire only in the task making
// the system call.
func taskOnly(attach []collectors.AttachPoint) bool {
	for _, a := range attach {
		t := strings.TrimPrefix(a.Target, "tracepoint ")
		if !strings.HasPrefix(t, "sys_enter") && !strings.HasPrefix(t, "sys_exit") {
			return false
		}
	}
	return len(attach) > 0
}

// resolveUnknown charges the samples whose chain stopped at the program:
// to their cgroup, as task context, where the program's hooks run in task
// context only; else to no cgroup. Rows that then name the same trigger
// are summed, and the list is sorted again, costliest first.
func resolveUnknown(costs []profile.TriggerCost, info progInfo) []profile.TriggerCost {
	at := map[profile.Trigger]int{}
	var out []profile.TriggerCost
	for _, c := range costs {
		if c.Context == profile.ContextUnknown {
			if info.taskOnly {
				c.Context = profile.ContextTask
			} else {
				c.Cgroup = ""
			}
		}
		if i, ok := at[c.Trigger]; ok {
			out[i].Samples += c.Samples
			out[i].Nanos += c.Nanos
			continue
		}
		at[c.Trigger] = len(out)
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Nanos > out[j].Nanos })
	return out
}

// programsOf names this boot's programs with these ids, with their
// network devices: the loaded ones from the sampler, the rest from the
// store (read only when some are not loaded).
func (q *Query) programsOf(ids map[uint32][]profile.TriggerCost) map[uint32]progInfo {
	out := make(map[uint32]progInfo, len(ids))
	q.Sampler.Read(func(v sampler.View) {
		for id := range ids {
			if p := v.Program(id); p != nil {
				out[id] = infoOf(p.Meta())
			}
		}
	})
	if len(out) == len(ids) {
		return out
	}
	recs, _ := q.Store.Programs() // a damaged store: names of loaded ones only
	for _, r := range recs {
		if _, want := ids[r.Key.ID]; !want || r.Key.Boot != q.Boot {
			continue
		}
		if _, ok := out[r.Key.ID]; ok {
			continue
		}
		var meta collectors.Meta
		if len(r.Meta) > 0 {
			json.Unmarshal(r.Meta, &meta) // a bad record: no devices
		}
		info := infoOf(&meta)
		info.name = r.Name
		out[r.Key.ID] = info
	}
	return out
}

// devices are the network attachments among a program's attach points
// ("tcx ifindex 4 (eth0) ingress"; in another network namespace by the
// namespace and the name there, "tcx pod ns-a/web-0 eth0 ingress").
func devices(attach []collectors.AttachPoint) []string {
	var out []string
	for _, a := range attach {
		if strings.HasPrefix(a.Target, "ifindex ") {
			out = append(out, a.Type+" "+a.NetnsTarget())
		}
	}
	return out
}

func triggerRow(id uint32, info progInfo, c profile.TriggerCost, progTotal int64, over time.Duration) api.TriggerRow {
	r := api.TriggerRow{
		ProgID: id, ProgName: info.name, Context: c.Context, Cgroup: c.Cgroup,
		Samples: c.Samples, CPUNs: c.Nanos,
	}
	if r.Context == "" {
		r.Context = "unlabelled" // a window stored before triggers were labelled
	}
	if c.Cgroup != "" && !strings.HasPrefix(c.Cgroup, "id ") {
		r.Unit, r.Container = collectors.UnitAndContainer(c.Cgroup)
	}
	if strings.HasPrefix(r.Context, profile.ContextSoftirq+"/net_") {
		r.Devices = info.devices
	}
	switch {
	case r.Container != "":
		r.Workload = r.Container
	case r.Unit != "":
		r.Workload = r.Unit
	case r.Cgroup == "/":
		r.Workload = "/ (root cgroup)"
	case r.Cgroup != "":
		r.Workload = r.Cgroup
	default:
		r.Workload = r.Context
		if len(r.Devices) > 0 {
			r.Workload += " on " + strings.Join(r.Devices, ", ")
		}
	}
	if over > 0 {
		r.CPUPercent = 100 * float64(c.Nanos) / float64(over.Nanoseconds())
	}
	if progTotal > 0 {
		r.Share = float64(c.Nanos) / float64(progTotal)
	}
	return r
}
