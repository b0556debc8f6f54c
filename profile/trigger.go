package profile

import (
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// Who triggered a BPF program's run, as Build labels each sample.
//
// A program runs on behalf of whatever made its hook fire. In task
// context (a system call, a page fault, a packet sent from a socket) that
// is the task the sample interrupted, and its cgroup is the workload to
// charge. In interrupt context it is not: a packet's XDP program runs in
// the NET_RX softirq, on whichever task's stack the softirq found, so
// charging that task would blame an innocent bystander. Build reads the
// context from the call chain outward from the program's frame: the first
// softirq handler or interrupt entry it meets decides.
const (
	// LabelContext is "task", "softirq/<kind>" (net_rx, net_tx, timer,
	// hrtimer, tasklet, block, rcu, sched, or none when only the generic
	// softirq loop shows), "hardirq", "nmi", or "unknown" where the call
	// chain ends at the program's frame.
	LabelContext = "context"
	// LabelCgroup is the cgroup v2 path of the interrupted task, on task
	// and unknown context samples (an unknown one may be task context: the
	// reader decides from the program's hook): "/system.slice/ssh.service",
	// or "id <n>" where the cgroup was gone before the window was built.
	LabelCgroup = "cgroup"
)

// Contexts LabelContext takes.
const (
	ContextTask    = "task"
	ContextSoftirq = "softirq"
	ContextHardirq = "hardirq"
	ContextNMI     = "nmi"
	// ContextUnknown: the call chain stops at the program (a sample in
	// its prologue or epilogue, outside its frame), so no caller says
	// whose work it was: 1 sample in 150 of a busy XDP loop here, but
	// most of a program of a few instructions' (181 of 186 for an empty
	// tracepoint program). Such samples keep the cgroup label; a program
	// whose hook only ever runs in task context (a syscall tracepoint) can
	// be charged by it (query does).
	ContextUnknown = "unknown"
)

// softirqKinds names the softirq whose handler a frame is. Names are the
// kernel's (6.1 to 6.18), older and newer spellings both.
var softirqKinds = map[string]string{
	"net_rx_action":         "net_rx",
	"net_tx_action":         "net_tx",
	"run_timer_softirq":     "timer",
	"hrtimer_run_softirq":   "hrtimer",
	"tasklet_action":        "tasklet",
	"tasklet_hi_action":     "tasklet",
	"blk_done_softirq":      "block",
	"irq_poll_softirq":      "block",
	"rcu_core_si":           "rcu",
	"run_rebalance_domains": "sched",
	"sched_balance_softirq": "sched",
}

// frameContext says which context a frame's function enters, "" for none.
func frameContext(fn string) string {
	if kind, ok := softirqKinds[fn]; ok {
		return ContextSoftirq + "/" + kind
	}
	switch fn {
	case "handle_softirqs", "__do_softirq", "do_softirq", "run_ksoftirqd":
		return ContextSoftirq
	case "exc_nmi", "asm_exc_nmi", "default_do_nmi":
		return ContextNMI
	case "handle_irq_event", "__common_interrupt", "common_interrupt", "asm_common_interrupt":
		return ContextHardirq
	}
	if strings.HasPrefix(fn, "__sysvec_") || strings.HasPrefix(fn, "sysvec_") || strings.HasPrefix(fn, "asm_sysvec_") {
		return ContextHardirq
	}
	return ""
}

// CgroupResolver names cgroup v2 ids (cgroupid.Resolver).
type CgroupResolver interface {
	Path(id uint64) (string, bool)
}

// cgroupLabel is the LabelCgroup of a task-context sample's cgroup id,
// "" when the kernel gave none.
func (b *builder) cgroupLabel(id uint64) string {
	if id == 0 {
		return ""
	}
	if l, ok := b.cgroups[id]; ok {
		return l
	}
	l := "id " + strconv.FormatUint(id, 10)
	if b.opts.Cgroups != nil {
		if p, ok := b.opts.Cgroups.Path(id); ok {
			l = p
		}
	}
	b.cgroups[id] = l
	return l
}

// Trigger is one workload that made a program run: a context and, in
// task context, the cgroup.
type Trigger struct {
	Context string
	Cgroup  string
}

// TriggerCost is the sampled cost a trigger caused in one program.
type TriggerCost struct {
	Trigger
	Samples int64
	// Nanos is the CPU time its samples stand for (cpu-clock profiles).
	Nanos int64
}

// ProgramTriggers returns, for each program id in p's prog_id labels, what
// triggered its samples, costliest first. Samples without a context label
// (profiles built before it existed) count as Trigger{} so totals still
// add up. It fails with ErrNoCPUValue when p has no cpu/nanoseconds values.
func ProgramTriggers(p *profile.Profile) (map[uint32][]TriggerCost, error) {
	vi, si := cpuAndSamples(p)
	if vi < 0 {
		return nil, ErrNoCPUValue
	}
	byProg := map[uint32]map[Trigger]*TriggerCost{}
	for _, s := range p.Sample {
		id, ok := sampleProg(s)
		if !ok || vi >= len(s.Value) {
			continue
		}
		tr := Trigger{Context: first(s.Label[LabelContext]), Cgroup: first(s.Label[LabelCgroup])}
		m := byProg[id]
		if m == nil {
			m = map[Trigger]*TriggerCost{}
			byProg[id] = m
		}
		c := m[tr]
		if c == nil {
			c = &TriggerCost{Trigger: tr}
			m[tr] = c
		}
		c.Nanos += s.Value[vi]
		if si >= 0 && si < len(s.Value) {
			c.Samples += s.Value[si]
		}
	}
	out := make(map[uint32][]TriggerCost, len(byProg))
	for id, m := range byProg {
		list := make([]TriggerCost, 0, len(m))
		for _, c := range m {
			list = append(list, *c)
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].Nanos != list[j].Nanos {
				return list[i].Nanos > list[j].Nanos
			}
			if list[i].Context != list[j].Context {
				return list[i].Context < list[j].Context
			}
			return list[i].Cgroup < list[j].Cgroup
		})
		out[id] = list
	}
	return out, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
