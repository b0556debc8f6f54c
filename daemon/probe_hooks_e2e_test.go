package daemon_test

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestProbeHooksEndToEnd: a uprobe and a uretprobe on a function of this
// test binary (here and in the VM) and, in the VM, a kretprobe and a
// kprobe_multi on getppid()'s kernel entry, each an empty program, driven
// by a loop of calls. bpfperf hooks has a row for each probe's machinery,
// named by its kind, charging its program (the uprobe row, whose
// breakpoint both uprobes take, the uretprobe's too) with runs, and no
// bare "tracepoint" row charged to nobody.
func TestProbeHooksEndToEnd(t *testing.T) {
	privtest.Root(t)
	privtest.Tracefs(t)
	kinds := slices.DeleteFunc(privtest.ProbeKinds(), func(k string) bool { return k == "kprobe" })
	// Stats on all the time (no budget): the rows' runs are the stats'.
	d, _ := startProfilingDaemon(t, "--stats.budget", "0")
	ids := map[string]uint32{}
	for _, kind := range kinds {
		prog := privtest.Probe(t, kind, "e2e_"+kind)
		info, _ := prog.Info()
		id, _ := info.ID()
		ids[kind] = uint32(id)
	}
	// The daemon reads attach points every few seconds: wait until it
	// names each probe's, as one attach point (on 6.1 the link names no
	// event: its holder's perf event does).
	var progs []api.ProgRow
	defer func() {
		if t.Failed() {
			t.Logf("the daemon's programs: %+v", progs)
		}
	}()
	eventuallyFor(t, time.Minute, "the probes' attach points", func() bool {
		d.json(t, &progs, "progs")
		for kind, id := range ids {
			i := slices.IndexFunc(progs, func(r api.ProgRow) bool { return r.ID == id })
			if i < 0 || len(progs[i].Attach) != 1 {
				return false
			}
			if a := progs[i].Attach[0]; a.LinkID == 0 || !strings.HasPrefix(a.Target, kind+" ") && a.Type != kind {
				return false
			}
		}
		return true
	})
	since := time.Now()
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			for range 100 {
				syscall.Getppid()
				privtest.UprobeTarget(1)
			}
			n += 100
		}
	}()
	defer func() {
		if stop != nil {
			close(stop)
			<-done
		}
	}()
	var h api.Hooks
	var lastErr error
	rows := map[string]api.HookRow{}
	defer func() {
		if t.Failed() {
			t.Logf("the last hooks answer: %+v, error %v\n%s", h, lastErr, d.stderr)
		}
	}()
	// Under emulation a window comes every few seconds at best.
	eventuallyFor(t, time.Minute, "a profile window with each probe's hook", func() bool {
		h = api.Hooks{}
		if lastErr = d.query(&h, "hooks", "--since", since.Add(-2*time.Second).Format(time.RFC3339Nano)); lastErr != nil {
			return false
		}
		for _, r := range h.Rows {
			rows[r.Hook] = r
		}
		for _, kind := range kinds {
			if r, ok := rows[kind]; !ok || r.NsPerRun == nil {
				return false
			}
		}
		return true
	})
	close(stop)
	calls := <-done
	stop = nil
	t.Logf("%d calls of each", calls)
	for _, r := range h.Rows {
		t.Logf("%s: %d samples, %v ns/run, %v x run_time, programs %+v", r.Hook, r.Samples, deref(r.NsPerRun), deref(r.RunTimeRatio), r.Programs)
		if r.Hook == "tracepoint" {
			t.Errorf("a bare tracepoint row: %+v", r)
		}
	}
	for _, kind := range kinds {
		want := []uint32{ids[kind]}
		if kind == "uprobe" {
			want = []uint32{ids["uprobe"], ids["uretprobe"]}
			slices.Sort(want)
		}
		var got []uint32
		for _, p := range rows[kind].Programs {
			got = append(got, p.ID)
			if p.Runs == 0 || p.Runs > uint64(calls) {
				t.Errorf("%s charges program %d with %d runs, want 1 to %d (the calls made)", kind, p.ID, p.Runs, calls)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s charges programs %v, want %v", kind, got, want)
		}
		if *rows[kind].NsPerRun <= 0 {
			t.Errorf("%s: %v ns a run", kind, *rows[kind].NsPerRun)
		}
	}
	show := d.cli(t, "show", strconv.Itoa(int(ids["uretprobe"])))
	t.Logf("$ bpfperf show %d\n%s", ids["uretprobe"], show)
}
