package chart_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/grafana"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// eventOnly are the dashboard's metrics that have no series until
// something happens that a few seconds of a quiet node do not make, and
// which test checks them in a live daemon's /metrics instead.
var eventOnly = map[string]string{
	"bpfperf_program_findings_total": "a regression found (daemon's TestRegressionEndToEnd reads it from /metrics)",
}

// TestDashboardSeriesOnNode renders the chart with its Grafana dashboard
// and the listener on, runs the pod on the node, and holds every metric
// name the dashboard's queries select (panels, annotations, variables)
// against the pod's live /metrics: a metric renamed or dropped in the
// daemon, or misspelt in the dashboard, leaves a panel empty and fails
// here. A program runs meanwhile (profiled every 2 s) so that the
// per-program series exist.
func TestDashboardSeriesOnNode(t *testing.T) {
	n := nodeWithImage(t)
	privtest.LockStats(t)
	port := freePort(t)
	objs := renderFor(t, t.TempDir(), "--set", "metrics.enabled=true", "--set", "metrics.port="+strconv.Itoa(port),
		"--set", "grafana.dashboard.enabled=true", "--set", "daemon.extraArgs={--profile.every=2s}")
	if objs.Dashboard == nil {
		t.Fatal("grafana.dashboard.enabled=true rendered no ConfigMap")
	}
	qs, err := grafana.Queries([]byte(objs.Dashboard.Data["bpfperf.json"]))
	if err != nil {
		t.Fatalf("the ConfigMap's dashboard: %v", err)
	}
	want := map[string][]string{} // metric name: where the dashboard uses it
	for _, q := range qs {
		names := grafana.MetricNames(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q.Where, q.Expr)
		}
		for _, m := range names {
			want[m] = append(want[m], q.Where)
		}
	}
	for m, why := range eventOnly {
		if _, ok := want[m]; !ok {
			t.Errorf("%s is excused (%s) but the dashboard no longer uses it", m, why)
		}
	}

	p := runChart(t, n, "bpfperf-dashboard", objs)
	client := p.client(t, n)
	prog, err := privtest.LoadLoop(fmt.Sprintf("dash_%d", time.Now().UnixNano()%100000), 500)
	privtest.Keep(t, prog, err)
	privtest.KeepRunning(t, prog, 20*time.Millisecond, 200)

	// What bpf_stats cost the programs is measured at start, with stats
	// off: where another process kept them on then (a second daemon, as
	// on a shared test host), the daemon says so in status and has no
	// such series, and the panel shows the estimate from its other query.
	excused := maps.Clone(eventOnly)
	if st, err := client.Status(); err != nil {
		t.Fatal(err)
	} else if sc := st.StatsCost; sc == nil || !sc.Measured {
		why := "no stats cost in status"
		if sc != nil {
			why = sc.Detail
		}
		excused["bpfperf_bpf_stats_cost_cpu_seconds_per_second"] = "status: stats cost " + why
	}
	var missing []string
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(time.Second) {
		series := scrape(t, port)
		missing = missing[:0]
		for m, where := range want {
			if !series[m] && excused[m] == "" {
				missing = append(missing, fmt.Sprintf("%s (%s)", m, strings.Join(slices.Compact(where), ", ")))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			t.Logf("%d metric names in %d dashboard queries; %d excused: %v", len(want), len(qs), len(excused), excused)
			break
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("the dashboard selects %s: the pod's /metrics has no such series", m)
	}
}

// scrape is the names of the series the pod's /metrics serves now
// (histograms' as _bucket, _sum and _count).
func scrape(t *testing.T, port int) map[string]bool {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}
