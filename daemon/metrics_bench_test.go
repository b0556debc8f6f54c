package daemon

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/sampler"
)

// BenchmarkMetricsPrograms serves the per-program families of 1,000
// programs through promhttp, gzipped (as Prometheus asks) and not, in
// process: the part of a scrape that grows with the programs
// (BenchmarkMetrics1000Programs measures a real daemon).
func BenchmarkMetricsPrograms(b *testing.B) {
	f := sampler.NewFixture()
	d := &Daemon{sampler: f.Sampler}
	for i := range 1000 {
		id := uint32(100 + i)
		f.Put(sampler.FixtureProgram{
			Meta: collectors.Meta{ID: id, Name: fmt.Sprintf("bench_m%d", i), Type: "socket_filter", Tag: "0011223344556677",
				Owners: []collectors.Owner{{PID: 1, Comm: "daemon.test"}}},
			Cur: collectors.Sample{ID: id, RunTimeNs: uint64(i) * 12345, RunCnt: uint64(i) * 7},
		})
	}
	m := &metrics{registry: prometheus.NewRegistry(), programs: newProgramFamilies(d)}
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
