package daemon_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// BenchmarkDashboardProgramPage: the program page over a week of
// one-minute data (internal/storegen, one steady program), in headless
// Chromium driven through the DevTools protocol. It reports the median of
// 5 loads (after one warm-up) of the time from navigation to the charts
// drawn (the page's data-drawn mark, set in the frame after uPlot drew:
// the /v1 fetches included, pprof's flame graph, an iframe of its own,
// not), and of that the /v1/history answers' time, at the page's own step
// for a week (15 min: 672 points a chart) and at ?step=60 (every
// one-minute point, 10,080 a chart); and the page weight: every byte the
// front page and the program page load from the dashboard (HTML, CSS,
// JavaScript, uPlot), the /v1 and pprof answers not counted.
func BenchmarkDashboardProgramPage(b *testing.B) {
	privtest.Root(b)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		privtest.Skip(b, "chromium is not installed (sudo make deps installs Debian's chromium)")
	}
	state := b.TempDir()
	db, err := store.Open(filepath.Join(state, daemon.StoreFile), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	end := time.Now().Add(-time.Minute).Truncate(time.Minute)
	start := end.Add(-7 * 24 * time.Hour)
	if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Steady: 1}, Start: start, Duration: end.Sub(start),
		Interval: time.Minute, Batch: 1440, BootID: "week-boot", FirstID: 5_000_000}); err != nil {
		b.Fatal(err)
	}
	progs, _ := db.Programs()
	db.Close()
	name := progs[0].Name
	web := freeAddr(b)
	startDaemon(b, state, "--web.listen-address", web)
	base := "http://" + web + "/"

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.UserDataDir(b.TempDir()))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()

	// drawn loads page and returns the page's data-drawn mark (ms after
	// navigation started) and the points its charts drew.
	drawn := func(page string) (ms, historyMs float64, points int) {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+page), chromedp.WaitReady("body[data-drawn]")); err != nil {
			b.Fatalf("%s: %v", page, err)
		}
		mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.drawn`))
		if err != nil {
			b.Fatalf("%s: %v", page, err)
		}
		pts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.chart[data-points]')].map((c) => c.dataset.points)`))
		if err != nil {
			b.Fatalf("%s: %v", page, err)
		}
		if historyMs, err = chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByType('resource')
			.filter((e) => e.name.includes('/v1/history')).reduce((n, e) => n + e.duration, 0)`)); err != nil {
			b.Fatalf("%s: %v", page, err)
		}
		ms, _ = strconv.ParseFloat(mark, 64)
		for _, p := range pts {
			n, _ := strconv.Atoi(p)
			points = max(points, n)
		}
		return ms, historyMs, points
	}
	// weight is the bytes of the page and of what it loaded from the
	// dashboard's files.
	weight := func(page string) float64 {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+page), chromedp.Sleep(time.Second)); err != nil {
			b.Fatalf("%s: %v", page, err)
		}
		bytes, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`
			performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
				.filter((e) => !/\/(v1|ui)\//.test(new URL(e.name).pathname))
				.reduce((n, e) => n + e.decodedBodySize, 0)`))
		if err != nil {
			b.Fatalf("%s: %v", page, err)
		}
		return bytes
	}

	for range b.N {
		b.ReportMetric(weight("")/1024, "front-page-KiB")
		b.ReportMetric(weight("program.html?prog="+name)/1024, "program-page-KiB")
		for _, v := range []struct{ unit, query string }{{"week", "&range=1w"}, {"week-every-minute", "&range=1w&step=60"}} {
			drawn("program.html?prog=" + name + v.query) // warm-up: the daemon's and browser's caches
			var times, fetches []float64
			var points int
			for range 5 {
				ms, history, n := drawn("program.html?prog=" + name + v.query)
				times, fetches, points = append(times, ms), append(fetches, history), n
			}
			b.ReportMetric(median(times), v.unit+"-draw-ms")
			b.ReportMetric(median(fetches), v.unit+"-history-fetch-ms")
			b.ReportMetric(float64(points), v.unit+"-points")
		}
	}
}
