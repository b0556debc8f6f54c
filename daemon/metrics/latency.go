package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descLatency = prometheus.NewDesc("bpfperf_program_latency_seconds",
		"Time of each run of a program in its newest latency window (fentry/fexit around every run; bpfperf latency, --latency.programs), raw: the timing floor (bpfperf_program_latency_floor_seconds) not taken off. Buckets every power of 4 from 64 ns to 1.07 s.",
		[]string{"id", "name"}, nil)
	descLatencyQuantile = prometheus.NewDesc("bpfperf_program_latency_quantile_seconds",
		"Quantiles of a program's run time in its newest latency window, read from its full-resolution histogram (within 1.6%) with the timing floor taken off; quantile=\"1\" is the longest run.",
		[]string{"id", "name", "quantile"}, nil)
	descLatencyFloor = prometheus.NewDesc("bpfperf_program_latency_floor_seconds",
		"What timing adds inside each measured run of a latency window (calibrated on an empty program), taken off the quantiles.",
		[]string{"id", "name"}, nil)
	descLatencyEventQuantile = prometheus.NewDesc("bpfperf_program_latency_event_quantile",
		"Quantiles of a perf event's count per run of a program in its newest latency window (--latency.event: cycles by default, where the CPU has a PMU), its floor (the timing's own count) taken off; quantile=\"1\" is the largest. Absent where the window counted no event.",
		[]string{"id", "name", "event", "quantile"}, nil)
)

// latencyBounds are the histogram's upper bounds in ns: 4^3 (64 ns) to
// 4^15 (1.07 s), each a power of two, so that whole stored buckets (one
// power of two each) fall under each.
var latencyBounds = func() []uint64 {
	var out []uint64
	for m := 6; m <= 30; m += 2 {
		out = append(out, 1<<m)
	}
	return out
}()

// latencyCollector reports Source.Latency: one histogram, its quantiles
// and floor per program, at most 50 programs.
type latencyCollector struct{ src Source }

var _ prometheus.Collector = (*latencyCollector)(nil)

func (c *latencyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLatency
	ch <- descLatencyQuantile
	ch <- descLatencyFloor
	ch <- descLatencyEventQuantile
}

func (c *latencyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.src.Latency() {
		id := strconv.FormatUint(uint64(w.ID), 10)
		buckets := make(map[float64]uint64, len(latencyBounds))
		var sum float64
		for _, le := range latencyBounds {
			var n uint64
			for _, b := range w.Buckets {
				if b.HiNs != 0 && b.HiNs <= le {
					n += b.Runs
				}
			}
			buckets[float64(le)/1e9] = n
		}
		// The sum is raw like the buckets: the floor back on the mean.
		sum = (w.MeanNs + w.FloorNs) * float64(w.Runs) / 1e9
		ch <- prometheus.MustNewConstHistogram(descLatency, w.Runs, sum, buckets, id, w.Name)
		for _, q := range []struct {
			name string
			ns   float64
		}{{"0.5", w.P50Ns}, {"0.9", w.P90Ns}, {"0.99", w.P99Ns}, {"0.999", w.P999Ns}, {"1", w.MaxNs}} {
			ch <- prometheus.MustNewConstMetric(descLatencyQuantile, prometheus.GaugeValue, q.ns/1e9, id, w.Name, q.name)
		}
		ch <- prometheus.MustNewConstMetric(descLatencyFloor, prometheus.GaugeValue, w.FloorNs/1e9, id, w.Name)
		if e := w.PerRun; e != nil {
			for _, q := range []struct {
				name string
				v    float64
			}{{"0.5", e.P50}, {"0.9", e.P90}, {"0.99", e.P99}, {"0.999", e.P999}, {"1", e.Max}} {
				ch <- prometheus.MustNewConstMetric(descLatencyEventQuantile, prometheus.GaugeValue, q.v, id, w.Name, e.Event, q.name)
			}
		}
	}
}
