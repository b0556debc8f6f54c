package grafana

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`topk(20, rate(bpfperf_program_run_time_seconds_total{instance=~"$instance"}[$__rate_interval]) * on(instance, id) group_left(name, type) bpfperf_program_info{instance=~"$instance"})`,
			[]string{"bpfperf_program_info", "bpfperf_program_run_time_seconds_total"}},
		{`1e9 * rate(a_total{x="y"}[5m]) / (rate(b_total[1m] offset 5m) > 0)`, []string{"a_total", "b_total"}},
		{`histogram_quantile(0.99, sum by (instance, le) (rate(h_bucket{instance=~"$instance"}[$__rate_interval])))`, []string{"h_bucket"}},
		{`max by (instance) (c) * on(instance) group_left() max without (id) (d)`, []string{"c", "d"}},
		{`up and on(instance, job) bpfperf_build_info unless ignoring(job) x`, []string{"bpfperf_build_info", "up", "x"}},
		{`sum(rate(e{a="}{[", b='x'}[${__rate_interval}])) > bool 0`, []string{"e"}},
		{`label_values(bpfperf_build_info, instance)`, []string{"bpfperf_build_info"}},
		{`label_values(instance)`, nil},
		{`vector(1) + 2.5e-3`, nil},
	} {
		if got := MetricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.expr, got, c.want)
		}
	}
}

func TestQueries(t *testing.T) {
	dash := `{"panels": [{"title": "p", "targets": [{"expr": "a"}, {"expr": "b"}]}],
		"annotations": {"list": [{"name": "n", "expr": "c"}]},
		"templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"},
			{"name": "i", "type": "query", "query": {"query": "label_values(d, instance)"}},
			{"name": "j", "type": "query", "query": "label_values(e, job)"}]}}`
	qs, err := Queries([]byte(dash))
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{{"panel p", "a", false}, {"panel p", "b", false}, {"annotation n", "c", false},
		{"variable i", "label_values(d, instance)", true}, {"variable j", "label_values(e, job)", true}}
	if !slices.Equal(qs, want) {
		t.Errorf("%+v, want %+v", qs, want)
	}
	for _, bad := range []string{`{"panels": [{"title": "empty"}]}`, `{}`, `{"templating": {"list": [{"name": "v", "type": "query"}]}}`} {
		if _, err := Queries([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
