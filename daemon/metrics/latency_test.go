package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/bpfperf/bpfperf/api"
)

// A window's power-of-two buckets come out cumulative under each bound,
// with its count, raw sum, quantiles less the floor, and the floor.
func TestLatencyMetrics(t *testing.T) {
	f := newFakeSource()
	f.latency = []api.LatencyWindow{{
		ID: 7, Name: "xdp_lb", Runs: 100, MeanNs: 700, FloorNs: 100,
		P50Ns: 500, P90Ns: 900, P99Ns: 30000, P999Ns: 31000, MaxNs: 40000,
		Buckets: []api.LatencyBucket{{LoNs: 512, HiNs: 1024, Runs: 98}, {LoNs: 32768, HiNs: 65536, Runs: 2}},
	}}
	want := `
# HELP bpfperf_program_latency_floor_seconds What timing adds inside each measured run of a latency window (calibrated on an empty program), taken off the quantiles.
# TYPE bpfperf_program_latency_floor_seconds gauge
bpfperf_program_latency_floor_seconds{id="7",name="xdp_lb"} 1e-07
`
	if err := testutil.CollectAndCompare(&latencyCollector{src: f}, strings.NewReader(want), "bpfperf_program_latency_floor_seconds"); err != nil {
		t.Error(err)
	}
	out, err := testutil.CollectAndFormat(&latencyCollector{src: f}, expfmt.TypeTextPlain, "bpfperf_program_latency_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`bpfperf_program_latency_seconds_bucket{id="7",name="xdp_lb",le="2.56e-07"} 0`,
		`bpfperf_program_latency_seconds_bucket{id="7",name="xdp_lb",le="1.024e-06"} 98`,
		`bpfperf_program_latency_seconds_bucket{id="7",name="xdp_lb",le="1.6384e-05"} 98`,
		`bpfperf_program_latency_seconds_bucket{id="7",name="xdp_lb",le="6.5536e-05"} 100`,
		`bpfperf_program_latency_seconds_bucket{id="7",name="xdp_lb",le="+Inf"} 100`,
		`bpfperf_program_latency_seconds_sum{id="7",name="xdp_lb"} 8e-05`,
		`bpfperf_program_latency_seconds_count{id="7",name="xdp_lb"} 100`,
	} {
		if !strings.Contains(string(out), line+"\n") {
			t.Errorf("missing %s in:\n%s", line, out)
		}
	}
	if n := testutil.CollectAndCount(&latencyCollector{src: f}, "bpfperf_program_latency_quantile_seconds"); n != 5 {
		t.Errorf("%d quantile series, want 5", n)
	}
	if n := testutil.CollectAndCount(&latencyCollector{src: f}, "bpfperf_program_latency_event_quantile"); n != 0 {
		t.Errorf("%d per-run event series for a window that counted none", n)
	}
	f.latency[0].PerRun = &api.LatencyEventCounts{Event: "cycles", Runs: 100, P50: 1500, P90: 2700, P99: 90000, P999: 93000, Max: 120000}
	want = `
# HELP bpfperf_program_latency_event_quantile Quantiles of a perf event's count per run of a program in its newest latency window (--latency.event: cycles by default, where the CPU has a PMU), its floor (the timing's own count) taken off; quantile="1" is the largest. Absent where the window counted no event.
# TYPE bpfperf_program_latency_event_quantile gauge
bpfperf_program_latency_event_quantile{event="cycles",id="7",name="xdp_lb",quantile="0.5"} 1500
bpfperf_program_latency_event_quantile{event="cycles",id="7",name="xdp_lb",quantile="0.9"} 2700
bpfperf_program_latency_event_quantile{event="cycles",id="7",name="xdp_lb",quantile="0.99"} 90000
bpfperf_program_latency_event_quantile{event="cycles",id="7",name="xdp_lb",quantile="0.999"} 93000
bpfperf_program_latency_event_quantile{event="cycles",id="7",name="xdp_lb",quantile="1"} 120000
`
	if err := testutil.CollectAndCompare(&latencyCollector{src: f}, strings.NewReader(want), "bpfperf_program_latency_event_quantile"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(&latencyCollector{src: newFakeSource()}); n != 0 {
		t.Errorf("without windows: %d series", n)
	}
}
