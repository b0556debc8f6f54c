package api

import (
	"time"
)

// TriggerRow is, in GET /v1/triggers, the sampled CPU one workload caused
// in one program: the workload whose work made the program's hook fire,
// not the process that loaded it (that is GET /v1/owners).
type TriggerRow struct {
	ProgID   uint32 `json:"prog_id"`
	ProgName string `json:"prog_name"`
	// Context is where the program ran: "task" (on behalf of the task
	// it interrupted: a system call, a fault, a packet sent), or
	// "softirq/net_rx" and the other softirqs, "softirq" when only the
	// generic loop shows, "hardirq", "nmi"; "unknown" where the call chain
	// stops at the program's frame, "unlabelled" for windows stored by a
	// bpfperfd before it told triggers apart. Work in interrupt context is
	// charged to the context, never to the task it happened to interrupt.
	Context string `json:"context"`
	// Cgroup is the triggering task's cgroup v2 path, in task context;
	// "id <n>" for a cgroup gone before its window was stored.
	Cgroup    string `json:"cgroup,omitempty"`
	Unit      string `json:"unit,omitempty"`      // systemd unit the cgroup names
	Container string `json:"container,omitempty"` // "pod <uid>/<id>", or a plain runtime's short id
	// Pod is the container's pod by name, where the CRI socket named it.
	Pod *Pod `json:"k8s,omitempty"`
	// Devices are the program's network attachments, for samples in a
	// network softirq: the packets of those devices triggered it.
	Devices []string `json:"devices,omitempty"`
	// Workload is the one name to show: the pod ("NAMESPACE/POD
	// (container NAME)"), else the container, else the unit, else the
	// cgroup ("/ (root cgroup)" for the root), else the context
	// (and devices).
	Workload string `json:"workload"`
	Samples  int64  `json:"samples"`
	CPUNs    int64  `json:"cpu_ns"`
	// CPUPercent is of one CPU over the windows' duration (bpftop's
	// convention).
	CPUPercent float64 `json:"cpu_percent"`
	// Share is the part of the program's sampled CPU, 0 to 1.
	Share float64 `json:"share"`
}

// Triggers is GET /v1/triggers: what triggered each program (or the one
// asked for) over the continuous profile windows wholly in [since,
// until]. Rows come by program, costliest program first, and within one
// program costliest trigger first.
type Triggers struct {
	Since      time.Time    `json:"since"`
	Until      time.Time    `json:"until"`
	Windows    int          `json:"windows"`
	DurationNs int64        `json:"duration_ns"`
	Rows       []TriggerRow `json:"rows"`
}

// Triggers returns what triggered prog's runs ("" for every program),
// only workload's rows where it is set (a workload name, unit, container,
// pod uid or cgroup path), over [since, until]; a zero since means the
// daemon's default (the last hour).
func (c *Client) Triggers(prog, workload string, since, until time.Time) (Triggers, error) {
	q := optionalRange(since, until)
	if prog != "" {
		q.Set("prog", prog)
	}
	if workload != "" {
		q.Set("workload", workload)
	}
	var t Triggers
	return t, c.get("triggers", q, &t)
}
