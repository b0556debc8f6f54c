package api

import "time"

// ProgRow is one program in GET /v1/progs.
type ProgRow struct {
	ID     uint32 `json:"id"`
	Type   string `json:"type"`
	Name   string `json:"name"`
	Tag    string `json:"tag"`
	Loaded bool   `json:"loaded"`
	Own    bool   `json:"own,omitempty"` // held by bpfperfd itself
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
}

// Meta is everything about one program instance that does not change while
// it is loaded. JSON names follow bpftool's `prog show -j` where bpftool
// has the field.
type Meta struct {
	ID            uint32        `json:"id"`
	Type          string        `json:"type"` // bpftool's name, "type_N" if unknown
	TypeID        uint32        `json:"type_id"`
	Name          string        `json:"name"`
	Tag           string        `json:"tag"` // 16 hex chars
	GPLCompatible bool          `json:"gpl_compatible"`
	LoadedAt      time.Time     `json:"loaded_at"`
	UID           uint32        `json:"uid"`
	BytesXlated   uint32        `json:"bytes_xlated"`
	BytesJited    uint32        `json:"bytes_jited"`
	BytesMemlock  uint64        `json:"bytes_memlock"`
	MapIDs        []uint32      `json:"map_ids"`
	BTFID         uint32        `json:"btf_id"`
	VerifiedInsns uint32        `json:"verified_insns"`
	Attach        []AttachPoint `json:"attach,omitempty"`
	Owners        []Owner       `json:"pids,omitempty"`
}

// Owner is a process holding a program or map, directly or through a
// link, with its cgroup and the systemd unit and container that names.
type Owner struct {
	PID       int    `json:"pid"`
	Comm      string `json:"comm"`
	Cgroup    string `json:"cgroup,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Container string `json:"container,omitempty"`
	// Pin is the bpffs path of an object no process holds (PID 0).
	Pin string `json:"pin,omitempty"`
}

// AttachPoint is one BPF link that attaches a program.
type AttachPoint struct {
	LinkID uint32 `json:"link_id"`
	Type   string `json:"type"`   // bpftool's link type name, "type_N" if unknown
	Target string `json:"target"` // e.g. "ifindex 1 (lo)", "sched_switch"; "" if the kernel does not tell
	// Missed counts events a kprobe, kretprobe or kprobe_multi link never
	// ran the program for (Linux 6.7 and later; absent otherwise), as of
	// the last reading of links.
	Missed *uint64 `json:"missed,omitempty"`
}
