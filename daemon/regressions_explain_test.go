package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// loadWorkProgram loads one of work.c's programs under name.
func loadWorkProgram(t *testing.T, prog, name string) *ebpf.Program {
	t.Helper()
	spec, err := loadWork()
	if err != nil {
		t.Fatal(err)
	}
	ps := spec.Programs[prog]
	ps.Name = name
	p, err := ebpf.NewProgram(ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A reload that adds a loop on a line of its own: the finding's
// explanation puts that line on top, and its profile diff opens in pprof.
func TestRegressionExplained(t *testing.T) {
	privtest.Root(t)
	const window = 4 * time.Second
	d := startDaemon(t, t.TempDir(), "--regressions.window", window.String(), "--profile.every", "1s", "--profile.duration", "1s", "--profile.hz", "499")
	name := uniqueName("rg_work")
	old := loadWorkProgram(t, "work", name)
	stopOld := pace(t, old, 100)
	time.Sleep(window + time.Second)
	stopNew := pace(t, loadWorkProgram(t, "work_more", name), 100)
	t.Cleanup(stopNew)
	stopOld()
	old.Close()

	var found []api.Regression
	deadline := time.Now().Add(window + 10*time.Second)
	for len(found) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		d.json(t, &found, "regressions", "--since", "1h", "--prog", name)
	}
	if len(found) != 1 || found[0].Kind != "regression" {
		t.Fatalf("findings %+v, want one regression\n%s", found, d.stderr)
	}
	r := found[0]
	ex := r.Explanation
	var top *api.Change
	for i, c := range ex.Top {
		if c.Level == "line" {
			top = &ex.Top[i]
			break
		}
	}
	t.Logf("ratio %.3f; explanation %+v", r.Ratio, ex)
	if ex.Off != "" || top == nil {
		t.Fatalf("no line in the explanation: %+v", ex)
	}
	if !strings.HasPrefix(top.Name, "extra_work work.c:") || top.Before != 0 || top.After <= 0 {
		t.Errorf("top changed line %+v, want extra_work's line in work.c, new in the after window", *top)
	}
	out := d.cli(t, "regressions", "show", r.ID, "-o", filepath.Join(t.TempDir(), "diff.pb.gz"))
	if !strings.Contains(out, top.Name) || !strings.Contains(out, "go tool pprof") {
		t.Errorf("regressions show does not name %q or the pprof command:\n%s", top.Name, out)
	}
	file := strings.Fields(out[strings.LastIndex(out, "go tool pprof -top ")+len("go tool pprof -top "):])[0]
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	if top := pprofTop(t, file); !strings.Contains(top, "extra_work") {
		t.Errorf("pprof -top of the diff does not show extra_work:\n%s", top)
	}
}
