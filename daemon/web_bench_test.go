package daemon_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkMetrics1000Programs scrapes bpfperfd's /metrics over 1,000
// loaded programs and reports the median answer time and the body's size,
// and the daemon CPU one scrape costs, as a share of one core at
// Prometheus's default 15 s interval (the daemon's CPU over back-to-back
// scrapes, less its CPU at rest over as long).
func BenchmarkMetrics1000Programs(b *testing.B) {
	privtest.Root(b)
	loadFilters(b, "bench_m", 1000)
	for range b.N {
		web := freeAddr(b)
		d := startDaemon(b, b.TempDir(), "--interval", "1s", "--web.listen-address", web)
		url := "http://" + web + "/metrics"
		loaded := regexp.MustCompile(`(?m)^bpfperf_programs (\d+)$`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			body := scrape(b, url)
			if m := loaded.FindSubmatch(body); m != nil {
				if n, _ := strconv.Atoi(string(m[1])); n >= 1000 {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatal("bpfperfd did not see 1,000 programs in 20s")
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(5 * time.Second) // let the one-time work on new programs end

		pid := d.cmd.Process.Pid
		const rest = 10 * time.Second
		cpu0 := procCPU(b, pid)
		time.Sleep(rest)
		idle := procCPU(b, pid) - cpu0

		const n = 200
		var times []float64
		var size int
		cpu1, at := procCPU(b, pid), time.Now()
		for range n {
			start := time.Now()
			size = len(scrape(b, url))
			times = append(times, float64(time.Since(start).Microseconds())/1000)
		}
		wall := time.Since(at)
		busy := procCPU(b, pid) - cpu1
		perScrape := (busy.Seconds() - idle.Seconds()*wall.Seconds()/rest.Seconds()) / n
		b.ReportMetric(median(times), "scrape-ms")
		b.ReportMetric(float64(size)/1024, "body-KiB")
		b.ReportMetric(perScrape*1000, "cpu-ms/scrape")
		b.ReportMetric(perScrape/15*100, "cpu-%-at-15s")
		d.stop(b, syscall.SIGTERM)
	}
}

func scrape(b *testing.B, url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return body
}
