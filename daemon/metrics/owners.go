package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Per-owner series: what each owner's maps hold. Programs already carry an
// owner label (bpfperf_program_* series), so their run time sums by owner
// in PromQL; maps have no series of their own, so their totals come here.
// The label is the owner's command (or pin path, or "(no holder)"), not its
// pid, so a restart keeps the series.
var (
	descOwnerMapBytes = prometheus.NewDesc("bpfperf_owner_map_memory_bytes",
		"Memory of the BPF maps charged to an owner (the kernel's memlock figure), at the last map reading.", []string{"owner"}, nil)
	descOwnerMaps = prometheus.NewDesc("bpfperf_owner_maps",
		"BPF maps charged to an owner at the last map reading.", []string{"owner"}, nil)
)

// ownerCollector reports the map totals of GET /v1/owners by owner.
type ownerCollector struct{ src Source }

var _ prometheus.Collector = (*ownerCollector)(nil)

func (c *ownerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOwnerMapBytes
	ch <- descOwnerMaps
}

func (c *ownerCollector) Collect(ch chan<- prometheus.Metric) {
	bytes, count := map[string]float64{}, map[string]float64{}
	for _, r := range c.src.Owners() {
		if r.Maps == 0 {
			continue
		}
		label := r.Comm
		if r.Kind != "process" {
			label = r.Owner
		}
		bytes[label] += float64(r.MapBytes)
		count[label] += float64(r.Maps)
	}
	for owner, v := range bytes {
		ch <- prometheus.MustNewConstMetric(descOwnerMapBytes, prometheus.GaugeValue, v, owner)
		ch <- prometheus.MustNewConstMetric(descOwnerMaps, prometheus.GaugeValue, count[owner], owner)
	}
}
