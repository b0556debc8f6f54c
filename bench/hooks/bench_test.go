package hooks

import (
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// BenchmarkLiveHooks is `bpfperf bench hooks` at its defaults: every hook
// this kernel allows, the table in the log and each figure as a metric.
// A hook the kernel refuses is logged with why, and has no metrics.
func BenchmarkLiveHooks(b *testing.B) {
	privtest.Root(b)
	privtest.Tracefs(b) // the tracepoint hook is found through it
	cfg := DefaultConfig()
	if vmtest.InVM() {
		// BenchmarkLiveHooksInVM: the hooks this host refuses, beside a
		// tracepoint, in fewer events (a getppid() takes ~500 ns there).
		cfg.Hooks, cfg.Syscalls = []string{"tracepoint", "fentry", "kprobe"}, 200_000
	}
	rs, err := Measure(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	tw.Write([]byte(strings.Join(Header, "\t") + "\n"))
	for _, row := range Rows(rs) {
		tw.Write([]byte(strings.Join(row, "\t") + "\n"))
	}
	tw.Flush()
	// The table alone: the testing package shows ten lines of a
	// benchmark's log, and the note (what the columns are) is the
	// CLI's.
	b.Logf("\n%s", strings.TrimSuffix(out.String(), "\n"))
	for _, r := range rs {
		if r.Unavailable != "" {
			continue
		}
		b.ReportMetric(r.Without.Median, r.Hook+"-without-ns/event")
		b.ReportMetric(r.Cost.Median, r.Hook+"-cost-ns/event")
		b.ReportMetric(r.Cost.IQR, r.Hook+"-cost-iqr-ns")
		b.ReportMetric(r.CostStats.Median, r.Hook+"-cost-stats-ns/event")
		b.ReportMetric(r.Run.Median, r.Hook+"-run-time-ns/run")
		b.ReportMetric(r.Outside.Median, r.Hook+"-outside-run-time-ns/event")
	}
}

// BenchmarkLiveHooksInVM runs BenchmarkLiveHooks in the test VM for the
// hooks this host's kernel refuses (fentry, kprobe), beside a tracepoint
// to compare them with: the VM's CPU is emulated, so only its own rows
// compare with each other.
func BenchmarkLiveHooksInVM(b *testing.B) {
	res := vmtest.RunTests(b, vmtest.Config{}, nil, "-test.run", "^$",
		"-test.bench", "^BenchmarkLiveHooks$", "-test.benchtime", "1x", "-test.v")
	m := vmtest.BenchMetrics(res.Output, "BenchmarkLiveHooks")
	if m == nil {
		b.Fatalf("no result from BenchmarkLiveHooks in the VM:\n%s", res.Output)
	}
	var table []string
	for line := range strings.Lines(res.Output) {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "HOOK" || slices.Contains(Names(), f[0])) {
			table = append(table, strings.TrimRight(line, "\n"))
		}
	}
	b.Logf("in the VM (emulated CPU: compare its rows with each other only):\n%s", strings.Join(table, "\n"))
	for unit, v := range m {
		if unit != "ns/op" {
			b.ReportMetric(v, "vm-"+unit)
		}
	}
}
