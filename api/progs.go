package api

import (
	"time"

	"github.com/bpfperf/bpfperf/collectors"
)

// ProgRow is one program in GET /v1/progs.
type ProgRow struct {
	ID   uint32 `json:"id"`
	Type string `json:"type"`
	// Name is the full name, as bpftool prints it: where the kernel cut
	// it to 15 characters, the BTF name of the program's entry function.
	Name string `json:"name"`
	// KernelName is the name the kernel keeps (at most 15 characters).
	KernelName string `json:"kernel_name"`
	Tag        string `json:"tag"`
	// Identity is what follows the program across reloads: "TYPE/NAME at
	// ATTACH by RUNNER #SLOT"; IdentityID its short hash, which PROG
	// arguments take. Both are absent until the identity is settled, a
	// few seconds after the program appears (its attach points and owners
	// read a tick or more later).
	Identity   string `json:"identity,omitempty"`
	IdentityID string `json:"identity_id,omitempty"`
	// Where is where the program is attached, as its identity says it
	// ("tcx dev bv1 ingress"); empty where it is attached nowhere known.
	Where string `json:"where,omitempty"`
	// Pod is the Kubernetes pod and container that run the program (its
	// loader's, else its first holder's), where the node's CRI socket
	// named it; absent elsewhere.
	Pod *Pod `json:"k8s,omitempty"`
	// Instances is how many programs a row of `progs --group name` sums
	// (SumByName); absent on a row of one program.
	Instances int  `json:"instances,omitempty"`
	Loaded    bool `json:"loaded"`
	Own       bool `json:"own,omitempty"` // loaded by bpfperfd itself
	Counters
	Rates
	AvgNsSinceLoad *float64  `json:"avg_ns_per_run_since_load,omitempty"`
	LoadedAt       time.Time `json:"loaded_at,omitzero"`
	UnloadedAt     time.Time `json:"unloaded_at,omitzero"`
	BootID         string    `json:"boot_id"`
	LastSample     time.Time `json:"last_sample,omitzero"`
	// Who holds the program and where it is attached, as last read
	// (refreshed every 30 s and when programs appear).
	Owners []Owner       `json:"pids,omitempty"`
	Attach []AttachPoint `json:"attach,omitempty"`
	// Loader is the process that loaded the program, where the daemon
	// ran at the time and the kernel's load record reached it.
	Loader *Loader `json:"loader,omitempty"`
	// MapBytes is the memory of the maps the program uses (each map's
	// memlock at the last map reading), absent before the first reading.
	MapBytes *uint64 `json:"map_bytes,omitempty"`
	// Filled only while CPU profiling runs: the program's share of sampled
	// CPU time, which also covers its tail-call targets.
	SampledCPUPercent *float64 `json:"sampled_cpu_percent,omitempty"`
	// Filled only while perf counters run for the program.
	CyclesPerRun       *float64 `json:"cycles_per_run,omitempty"`
	InstructionsPerRun *float64 `json:"instructions_per_run,omitempty"`
	IPC                *float64 `json:"ipc,omitempty"`
	LLCMissesPerRun    *float64 `json:"llc_misses_per_run,omitempty"`
	// The last counting window's per-run figures and the mechanism behind
	// them.
	PerfCounters *PerfCounters `json:"perf_counters,omitempty"`
}

// ProgCounters is one program in GET /v1/progs?fields=counters: only what
// changes every tick, for views that refresh often (bpfperf top) and take
// the rest from a full listing now and then.
type ProgCounters struct {
	ID  uint32 `json:"id"`
	Tag string `json:"tag"`
	Counters
	LastSampleMs int64 `json:"last_sample_ms"` // unix milliseconds
}

// ProgDetail is GET /v1/progs/{prog}: the row plus all metadata.
type ProgDetail struct {
	ProgRow
	Meta Meta `json:"meta"`
	// Latency is the program's newest latency window, absent before one.
	Latency *LatencyWindow `json:"latency,omitempty"`
}

// Meta is everything about one program instance that does not change while
// it is loaded, as the daemon reads and stores it (collectors.Meta: one
// definition). JSON names follow bpftool's `prog show -j` where bpftool
// has the field.
type Meta = collectors.Meta

// Owner is a process holding a program or map, directly or through a
// link, with its cgroup and the systemd unit and container that names
// (collectors.Owner).
type Owner = collectors.Owner

// Loader is the process that loaded a program, from the kernel's load
// record (collectors.Loader).
type Loader = collectors.Loader

// Pod is a container by its Kubernetes names: namespace, pod, container,
// workload (collectors.Pod).
type Pod = collectors.Pod

// AttachPoint is one place a program is attached: a BPF link, a netlink
// attachment or a perf event (collectors.AttachPoint).
type AttachPoint = collectors.AttachPoint

// SumByName folds rows that share a type and a name (one object attached
// to many devices or cgroups, a tool running twice) into one row each, in
// first-seen order: counters and rates summed (SumRates), Instances
// counting the programs, ID the lowest of them, Where, Identity and Pod
// kept only where all agree.
func SumByName(rows []ProgRow) []ProgRow {
	type key struct{ typ, name string }
	at := map[key]int{}
	var out []ProgRow
	var rates [][]Rates
	for _, r := range rows {
		k := key{r.Type, r.Name}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			g := ProgRow{ID: r.ID, Type: r.Type, Name: r.Name, KernelName: r.KernelName, Tag: r.Tag, Loaded: r.Loaded, Own: r.Own,
				Identity: r.Identity, IdentityID: r.IdentityID, Where: r.Where, Pod: r.Pod, Counters: r.Counters, Instances: 1, BootID: r.BootID}
			out = append(out, g)
			rates = append(rates, []Rates{r.Rates})
			continue
		}
		g := &out[i]
		g.Instances++
		g.ID = min(g.ID, r.ID)
		g.RunTimeNs += r.RunTimeNs
		g.RunCnt += r.RunCnt
		g.RecursionMisses += r.RecursionMisses
		g.Loaded = g.Loaded || r.Loaded
		if g.Tag != r.Tag {
			g.Tag = "*"
		}
		if g.Where != r.Where {
			g.Where = "*"
		}
		if g.Identity != r.Identity {
			g.Identity, g.IdentityID = "", ""
		}
		if g.Pod != nil && (r.Pod == nil || *g.Pod != *r.Pod) {
			g.Pod = nil
		}
		rates[i] = append(rates[i], r.Rates)
	}
	for i := range out {
		out[i].Rates = SumRates(rates[i])
	}
	return out
}
