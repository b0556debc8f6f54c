package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/bpfperf/bpfperf/api"
)

// TestTriggerSeriesBounded: a program with five triggers gets its three
// largest and one "other" summing the rest; 25 workloads across programs
// get the 20 largest and one "other".
func TestTriggerSeriesBounded(t *testing.T) {
	f := newFakeSource()
	for i, share := range []float64{0.5, 0.25, 0.125, 0.0625, 0.0625} {
		f.triggers = append(f.triggers, api.TriggerRow{ProgID: 7, ProgName: "xdp_main", Workload: fmt.Sprintf("w%d.service", i), Context: "task", Share: share, CPUPercent: 100 * share})
	}
	for i := range 20 {
		f.triggers = append(f.triggers, api.TriggerRow{ProgID: 9, ProgName: "execs", Workload: fmt.Sprintf("x%02d", i), Context: "task", Share: 0.03125, CPUPercent: 0.1})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&triggerCollector{src: f})
	var want strings.Builder
	want.WriteString(`# HELP bpfperf_program_trigger_share_ratio ` + helpOf(descTriggerShare) + `
# TYPE bpfperf_program_trigger_share_ratio gauge
bpfperf_program_trigger_share_ratio{container="",context="other",id="7",name="xdp_main",namespace="",pod="",workload="other"} 0.125
bpfperf_program_trigger_share_ratio{container="",context="other",id="9",name="execs",namespace="",pod="",workload="other"} 0.53125
bpfperf_program_trigger_share_ratio{container="",context="task",id="7",name="xdp_main",namespace="",pod="",workload="w0.service"} 0.5
bpfperf_program_trigger_share_ratio{container="",context="task",id="7",name="xdp_main",namespace="",pod="",workload="w1.service"} 0.25
bpfperf_program_trigger_share_ratio{container="",context="task",id="7",name="xdp_main",namespace="",pod="",workload="w2.service"} 0.125
bpfperf_program_trigger_share_ratio{container="",context="task",id="9",name="execs",namespace="",pod="",workload="x00"} 0.03125
bpfperf_program_trigger_share_ratio{container="",context="task",id="9",name="execs",namespace="",pod="",workload="x01"} 0.03125
bpfperf_program_trigger_share_ratio{container="",context="task",id="9",name="execs",namespace="",pod="",workload="x02"} 0.03125
`)
	// Compared as text: the text parser would drop the empty pod labels
	// that every scrape has.
	if got, err := testutil.CollectAndFormat(&triggerCollector{src: f}, expfmt.TypeTextPlain, "bpfperf_program_trigger_share_ratio"); err != nil || string(got) != want.String() {
		t.Errorf("got (%v):\n%s\nwant:\n%s", err, got, want.String())
	}
	if n := testutil.CollectAndCount(&triggerCollector{src: f}, "bpfperf_workload_triggered_cpu_ratio"); n != topWorkloads+1 {
		t.Errorf("%d workload series, want %d and other", n, topWorkloads)
	}
	f.hooks = map[string]float64{"syscall_enter": 0.01, "stats_clock": 0.002}
	if n := testutil.CollectAndCount(&triggerCollector{src: f}, "bpfperf_hook_cpu_ratio"); n != 2 {
		t.Errorf("%d hook series, want 2", n)
	}
	// A host tracing many functions: the costliest 20 and one other.
	for i := range 30 {
		f.hooks[fmt.Sprintf("trampoline:f%02d", i)] = 0.001 * float64(i)
	}
	if n := testutil.CollectAndCount(&triggerCollector{src: f}, "bpfperf_hook_cpu_ratio"); n != topHooks+1 {
		t.Errorf("%d hook series, want %d and other", n, topHooks)
	}
	if n := testutil.CollectAndCount(&triggerCollector{src: newFakeSource()}); n != 0 {
		t.Errorf("before the first window: %d series", n)
	}
}

// helpOf is a description's help text.
func helpOf(d *prometheus.Desc) string {
	s := d.String()
	_, s, _ = strings.Cut(s, `help: "`)
	s, _, _ = strings.Cut(s, `", `)
	return strings.ReplaceAll(s, `\"`, `"`)
}
