package metrics

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Who triggers BPF programs, and what their hooks cost, from the latest
// continuous profile window.
// Cardinality is bounded twice over: per program, its topTriggers
// costliest workloads get a series and the rest one workload="other";
// across programs, the topWorkloads costliest workloads get a series and
// the rest one "other". Workloads are names (unit, container, cgroup,
// context), not ids, so a restarted service keeps its series.
const (
	topTriggers  = 3
	topWorkloads = 20
	// topHooks: a hook is a kind (syscall_enter) or a place (a
	// tracepoint, a traced function: trampoline:vfs_read), and a host
	// tracing hundreds of functions would give each a series.
	topHooks = 20
	other    = "other"
)

var (
	descTriggerShare = prometheus.NewDesc("bpfperf_program_trigger_share_ratio",
		"Part of a program's sampled CPU in the latest profile window that a workload triggered: its cgroup's Kubernetes workload (with namespace, pod and container), unit, container or path in task context, or the interrupt context (softirq/net_rx, hardirq). The 3 largest per program, the rest as workload=\"other\".",
		[]string{"id", "name", "workload", "context", "namespace", "pod", "container"}, nil)
	descHookCPU = prometheus.NewDesc("bpfperf_hook_cpu_ratio",
		"CPU seconds per second spent in a hook's machinery around the programs attached to it, outside their run_time_ns, in the latest profile window (sampled): syscall_enter, syscall_exit, syscall_slow_path, raw_tp:<tracepoint>, tracepoint:<event>, trampoline:<function>, kprobe, kretprobe, kprobe_multi, uprobe, uretprobe, stats_clock. One series per kind of hook, attached tracepoint and traced function, the 20 costliest, the rest summed as hook=\"other\".",
		[]string{"hook"}, nil)
	descWorkloadCPU = prometheus.NewDesc("bpfperf_workload_triggered_cpu_ratio",
		"CPU seconds per second that a workload made BPF programs spend, summed over programs, in the latest profile window (sampled); a Kubernetes pod's container is a workload of its own, with namespace, pod and container. The 20 largest workloads, the rest as workload=\"other\".",
		[]string{"workload", "context", "namespace", "pod", "container"}, nil)
)

// triggerCollector reports Source.Triggers.
type triggerCollector struct{ src Source }

var _ prometheus.Collector = (*triggerCollector)(nil)

func (c *triggerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTriggerShare
	ch <- descWorkloadCPU
	ch <- descHookCPU
}

func (c *triggerCollector) Collect(ch chan<- prometheus.Metric) {
	largest(c.src.Hooks(), topHooks, func(a, b string) bool { return a < b },
		func(hook string, v float64) {
			ch <- prometheus.MustNewConstMetric(descHookCPU, prometheus.GaugeValue, v, hook)
		},
		func(rest float64) {
			ch <- prometheus.MustNewConstMetric(descHookCPU, prometheus.GaugeValue, rest, other)
		})
	rows := c.src.Triggers()
	type key struct{ workload, context, namespace, pod, container string }
	byWorkload := map[key]float64{}
	// Rows come by program, each program's costliest trigger first.
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].ProgID == rows[start].ProgID {
			end++
		}
		id, name := strconv.FormatUint(uint64(rows[start].ProgID), 10), rows[start].ProgName
		var rest float64
		for i, r := range rows[start:end] {
			k := key{workload: r.Workload, context: r.Context}
			if p := r.Pod; p != nil {
				// The labels users join on: each row is one container's
				// cgroup already, so they split no series.
				k = key{p.Workload, r.Context, p.Namespace, p.Pod, p.Container}
			}
			if i < topTriggers {
				ch <- prometheus.MustNewConstMetric(descTriggerShare, prometheus.GaugeValue, r.Share, id, name, k.workload, k.context, k.namespace, k.pod, k.container)
			} else {
				rest += r.Share
			}
			byWorkload[k] += r.CPUPercent / 100
		}
		if end-start > topTriggers {
			ch <- prometheus.MustNewConstMetric(descTriggerShare, prometheus.GaugeValue, rest, id, name, other, other, "", "", "")
		}
		start = end
	}
	largest(byWorkload, topWorkloads, func(a, b key) bool { return a.workload < b.workload || (a.workload == b.workload && a.pod < b.pod) },
		func(k key, v float64) {
			ch <- prometheus.MustNewConstMetric(descWorkloadCPU, prometheus.GaugeValue, v, k.workload, k.context, k.namespace, k.pod, k.container)
		},
		func(rest float64) {
			ch <- prometheus.MustNewConstMetric(descWorkloadCPU, prometheus.GaugeValue, rest, other, other, "", "", "")
		})
}

// largest sends the n largest of values (ties in key order) to each and
// the sum of the rest, if any, to rest.
func largest[K comparable](values map[K]float64, n int, less func(a, b K) bool, each func(K, float64), rest func(float64)) {
	keys := make([]K, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if values[keys[i]] != values[keys[j]] {
			return values[keys[i]] > values[keys[j]]
		}
		return less(keys[i], keys[j])
	})
	var sum float64
	for i, k := range keys {
		if i < n {
			each(k, values[k])
		} else {
			sum += values[k]
		}
	}
	if len(keys) > n {
		rest(sum)
	}
}
