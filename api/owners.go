package api

import (
	"time"
)

// OwnerRow is one owner in GET /v1/owners: a process (or, for objects no
// process holds, a pin path or nobody) and what it costs the host. Each
// program and map is charged once, to its first holder by pid; a map no
// process holds goes to the owner of the first program that uses it.
type OwnerRow struct {
	// Owner names it: "comm[pid]", "pin:/sys/fs/bpf/...", or "(no holder)"
	// for attached programs that no process or pin holds.
	Owner     string `json:"owner"`
	Kind      string `json:"kind"` // "process", "pin" or "none"
	PID       int    `json:"pid,omitempty"`
	Comm      string `json:"comm,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Cgroup    string `json:"cgroup,omitempty"`
	Container string `json:"container,omitempty"`
	// Pod is its container's pod by name, where the CRI socket named it.
	Pod *Pod `json:"k8s,omitempty"`
	// Present: it holds loaded programs or maps now. In a --since view an
	// owner whose programs and maps are all gone reads false.
	Present  bool `json:"present"`
	Programs int  `json:"programs"`
	// Counters are the run count and run time of its programs: cumulative
	// since load in the live view, over the window with since.
	Counters
	RunsPerSec        *float64 `json:"runs_per_sec,omitempty"`
	CPUPercent        *float64 `json:"cpu_percent,omitempty"`
	SampledCPUPercent *float64 `json:"sampled_cpu_percent,omitempty"`
	Maps              int      `json:"maps"`
	MapBytes          uint64   `json:"map_bytes"`
}

// Owners is GET /v1/owners: live (the last two sweeps) without since, or
// over [since, until].
type Owners struct {
	Since  time.Time  `json:"since,omitzero"`
	Until  time.Time  `json:"until,omitzero"`
	Owners []OwnerRow `json:"owners"`
}

// Owners returns what each owner costs now, or over [since, until] when
// since is not zero.
// With owner (a name, pid, comm, unit or container) only the owners it
// names.
func (c *Client) Owners(since, until time.Time, owner string) (Owners, error) {
	q := optionalRange(since, until)
	if owner != "" {
		q.Set("owner", owner)
	}
	var o Owners
	return o, c.get("owners", q, &o)
}
