package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bpfperf/bpfperf/collectors"
)

// BenchmarkMetricsPrograms serves the per-program families of 1,000
// programs through promhttp, gzipped (as Prometheus asks) and not, in
// process: the part of a scrape that grows with the programs
// (BenchmarkMetrics1000Programs measures a real daemon).
func BenchmarkMetricsPrograms(b *testing.B) {
	f := newFakeSource()
	for i := range 1000 {
		id := uint32(100 + i)
		f.Put(Program{
			ID: id, Meta: meta(collectors.Meta{ID: id, Name: fmt.Sprintf("bench_m%d", i), Type: "socket_filter", Tag: "0011223344556677",
				Owners: []collectors.Owner{{PID: 1, Comm: "daemon.test"}}}),
			Cur: collectors.Sample{ID: id, RunTimeNs: uint64(i) * 12345, RunCnt: uint64(i) * 7},
		})
	}
	m := &Metrics{registry: prometheus.NewRegistry(), programs: newProgramFamilies(f, 2000)}
	h := promhttp.HandlerForTransactional(m, promhttp.HandlerOpts{})
	for _, enc := range []string{"gzip", "identity"} {
		b.Run(enc, func(b *testing.B) {
			for b.Loop() {
				r := httptest.NewRequest("GET", "/metrics", nil)
				r.Header.Set("Accept-Encoding", enc)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				io.Copy(io.Discard, w.Body)
			}
		})
	}
}
