package api

import (
	"time"
)

// HookRow is, in GET /v1/hooks, what one hook's machinery around the
// programs attached to it cost over the range, as the CPU profile sampled
// it: time the kernel spends entering and leaving the programs, which
// their run_time_ns does not count.
type HookRow struct {
	// Hook names it: "syscall_enter", "syscall_exit" (perf's glue for
	// syscall tracepoints), "syscall_slow_path" (the entry and exit work
	// every system call pays while a syscall tracepoint is on),
	// "raw_tp:<tracepoint>", "kprobe", "kretprobe", "kprobe_multi",
	// "uprobe" (the breakpoint every uprobe and uretprobe takes),
	// "uretprobe", "tracepoint:<event>", "trampoline:<function>", or
	// "stats_clock" (bpf_stats' own clock reads, every program's while
	// stats are on).
	Hook       string  `json:"hook"`
	Samples    int64   `json:"samples"`
	CPUNs      int64   `json:"cpu_ns"`
	CPUPercent float64 `json:"cpu_percent"` // of one CPU over the windows
	// Programs are the loaded programs attached where this hook fires:
	// its cost is theirs together.
	Programs []HookProgram `json:"programs"`
	// NsPerRun is CPUNs over the programs' runs in the windows' span, and
	// RunTimeRatio is CPUNs over their run_time_ns there (the hook's cost
	// beside what bpf_stats counts); nil where no run was counted.
	NsPerRun     *float64 `json:"ns_per_run,omitempty"`
	RunTimeRatio *float64 `json:"run_time_ratio,omitempty"`
}

// HookProgram is one program a hook row charges.
type HookProgram struct {
	ID        uint32 `json:"id"`
	Name      string `json:"name"`
	Runs      uint64 `json:"runs"`
	RunTimeNs uint64 `json:"run_time_ns"`
}

// Hooks is GET /v1/hooks: the hooks' cost over the continuous profile
// windows wholly in [since, until], costliest first.
type Hooks struct {
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	Windows    int       `json:"windows"`
	DurationNs int64     `json:"duration_ns"`
	Rows       []HookRow `json:"rows"`
}

// Hooks returns what the hooks cost over [since, until] (a zero since:
// the daemon's default, the last hour), only those prog is attached to
// where prog is set.
func (c *Client) Hooks(prog string, since, until time.Time) (Hooks, error) {
	q := optionalRange(since, until)
	if prog != "" {
		q.Set("prog", prog)
	}
	var h Hooks
	return h, c.get("hooks", q, &h)
}
