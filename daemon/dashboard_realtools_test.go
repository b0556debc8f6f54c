package daemon_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestDashboardRealTools: with execsnoop and opensnoop running, the front
// page lists their programs under their full names with where they are
// attached, and the program page of opensnoop's openat exit handler (its
// kernel name is the cut tracepoint__sys) focuses pprof's flame graph of
// the range on it: its frame is there, not "matched no samples".
func TestDashboardRealTools(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	web := freeAddr(t)
	d := startDaemon(t, t.TempDir(), "--web.listen-address", web, "--interval", "1s", "--profile.every", "2s", "--profile.hz", "499")
	b := newBrowser(t, "http://"+web+"/")
	execs := startTool(t, "execsnoop")
	opens := startTool(t, "opensnoop")
	toolProgs(t, execs.pid, 2)
	exit := toolProgs(t, opens.pid, 4)["sys_exit_openat"]
	stop := openLoad(t, 2000)
	defer stop()
	row := settledRows(t, d, exit)[exit]
	const name = "tracepoint__syscalls__sys_exit_openat"
	if row.Name != name {
		t.Fatalf("program %d is %q, want %s", exit, row.Name, name)
	}
	var profiles []api.ProfileInfo
	eventuallyFor(t, 20*time.Second, "two continuous profile windows with samples", func() bool {
		return d.query(&profiles, "profile", "list") == nil && len(profiles) > 1 && profiles[len(profiles)-1].Samples > 0
	})
	// The page shows the hooks over stored windows: wait for one that
	// sampled the exit program's syscall_exit glue (the open load makes
	// it busy, but a window at 499 Hz may miss it).
	eventuallyFor(t, 20*time.Second, "a stored window with syscall_exit samples of the exit program", func() bool {
		var h api.Hooks
		if d.query(&h, "hooks", fmt.Sprint(exit)) != nil {
			return false
		}
		return slices.ContainsFunc(h.Rows, func(r api.HookRow) bool { return r.Hook == "syscall_exit" })
	})
	eventuallyFor(t, 10*time.Second, "three stored sweeps", func() bool {
		var pts []api.HistoryPoint
		return d.query(&pts, "history", fmt.Sprint(exit), "--since", "1h") == nil && len(pts) >= 3
	})

	front := b.dom(t, "", "programs-real-tools")
	for _, want := range []string{
		fmt.Sprintf(`<a href="program.html?prog=%d">%s</a>`, exit, name),
		"<td class=\"text\">perf_event tracepoint sys_exit_openat</td>",
		">tracepoint__syscalls__sys_enter_execve</a>", ">tracepoint__syscalls__sys_exit_execve</a>",
	} {
		if !strings.Contains(front, want) {
			t.Errorf("front page lacks %s:\n%.4000s", want, front)
		}
	}
	if strings.Contains(front, ">tracepoint__sys</a>") {
		t.Errorf("front page lists a program under its cut name")
	}

	prog := b.dom(t, fmt.Sprintf("program.html?prog=%d", exit), "program-real-tool")
	if !strings.Contains(prog, "<h1>"+name+" ") || !strings.Contains(prog, "perf_event tracepoint sys_exit_openat") {
		t.Errorf("program page: no %s heading with where it is attached:\n%.3000s", name, prog)
	}
	// opensnoop's exit program, entered from the syscall exit tracepoint's
	// perf glue, which the open load keeps busy.
	if !regexp.MustCompile(`<div id="hooks"><table>.*<td class="text">syscall_exit</td>`).MatchString(prog) {
		t.Errorf("program page: no hook overhead row for syscall_exit:\n%.4000s", prog)
	}
	src := regexp.MustCompile(`<iframe class="pprof" id="flamegraph" loading="lazy" src="([^"]+)"`).FindStringSubmatch(prog)
	if src == nil {
		t.Fatalf("program page: no flame graph frame")
	}
	flame := b.dom(t, strings.TrimPrefix(htmlUnescape(src[1]), "/"), "flamegraph-real-tool")
	if strings.Contains(flame, "matched no samples") || !strings.Contains(flame, `<div class="boxtext">`+name) {
		t.Errorf("flame graph of the range: no frame for %s:\n%.2000s", name, flame)
	}
}
