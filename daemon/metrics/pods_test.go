package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
)

// TestPodLabels (issue 43): a program loaded in a pod the CRI named has
// namespace, pod, container and workload on its info series; a trigger row
// of a pod's container has them on its trigger series, workload its KIND/NAME.
// Programs and rows of no pod keep the labels they had.
func TestPodLabels(t *testing.T) {
	pod := &collectors.Pod{Namespace: "ns-a", Pod: "loader-7d9f8b6c5-x2k4p", UID: "u1", Container: "loader", ContainerID: "c1", Workload: "Deployment/loader"}
	f := newFakeSource()
	f.Put(Program{ID: 6, Meta: meta(collectors.Meta{ID: 6, Name: "p", Type: "tracepoint", Tag: "0011223344556677",
		Loader: &collectors.Loader{PID: 9, Container: "pod u1/c1", Pod: pod}})})
	f.Put(Program{ID: 5, Meta: meta(collectors.Meta{ID: 5, Name: "q", Type: "tracepoint", Tag: "0011223344556677"})})
	want := `
# HELP bpfperf_program_info A loaded program's metadata, 1 for each, to join on id.
# TYPE bpfperf_program_info gauge
bpfperf_program_info{attach="",id="5",identity="",name="q",owner="",tag="0011223344556677",type="tracepoint"} 1
bpfperf_program_info{attach="",container="loader",id="6",identity="",name="p",namespace="ns-a",owner="",pod="loader-7d9f8b6c5-x2k4p",tag="0011223344556677",type="tracepoint",workload="Deployment/loader"} 1
`
	if err := testutil.TransactionalGatherAndCompare(programsOnly{newProgramFamilies(f, 10)}, strings.NewReader(want), "bpfperf_program_info"); err != nil {
		t.Error(err)
	}

	f.triggers = []api.TriggerRow{
		{ProgID: 6, ProgName: "p", Workload: pod.String(), Context: "task", Pod: pod, Share: 0.75, CPUPercent: 3},
		{ProgID: 6, ProgName: "p", Workload: "cron.service", Context: "task", Share: 0.25, CPUPercent: 1},
	}
	want = `# HELP bpfperf_program_trigger_share_ratio ` + helpOf(descTriggerShare) + `
# TYPE bpfperf_program_trigger_share_ratio gauge
bpfperf_program_trigger_share_ratio{container="",context="task",id="6",name="p",namespace="",pod="",workload="cron.service"} 0.25
bpfperf_program_trigger_share_ratio{container="loader",context="task",id="6",name="p",namespace="ns-a",pod="loader-7d9f8b6c5-x2k4p",workload="Deployment/loader"} 0.75
# HELP bpfperf_workload_triggered_cpu_ratio ` + helpOf(descWorkloadCPU) + `
# TYPE bpfperf_workload_triggered_cpu_ratio gauge
bpfperf_workload_triggered_cpu_ratio{container="",context="task",namespace="",pod="",workload="cron.service"} 0.01
bpfperf_workload_triggered_cpu_ratio{container="loader",context="task",namespace="ns-a",pod="loader-7d9f8b6c5-x2k4p",workload="Deployment/loader"} 0.03
`
	got, err := testutil.CollectAndFormat(&triggerCollector{src: f}, expfmt.TypeTextPlain, "bpfperf_program_trigger_share_ratio", "bpfperf_workload_triggered_cpu_ratio")
	if err != nil || string(got) != want {
		t.Errorf("got (%v):\n%s\nwant:\n%s", err, got, want)
	}
}
