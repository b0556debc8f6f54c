package chart_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/chart"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestLivenessOnNode: the chart's liveness probe, as rendered, catches a
// sampler that stopped while the API still answers, in the pod on the
// node. The pod's store directory (its hostPath) is a file system of its
// own, frozen as fsfreeze does: the daemon's next store write blocks in
// the kernel, and with it the tick. The liveness probe (bpfperf health)
// must fail within the bound, 10 intervals and at least 10 s, while the
// readiness probe (bpfperf status) still passes, which is why status
// cannot be the liveness probe; thawed, the liveness probe passes again.
// The start-up probe (health too) passes first, as a kubelet waits for it.
func TestLivenessOnNode(t *testing.T) {
	n := nodeWithImage(t)
	privtest.LockStats(t)
	fz := privtest.FreezableDir(t)
	objs := renderFor(t, t.TempDir(), "--set", "daemon.stateDir="+fz.Path)
	p := runChart(t, n, "bpfperf-liveness", objs)
	p.client(t, n)
	c, _ := objs.Container()
	live, ready := chart.Probe(c.LivenessProbe), chart.Probe(c.ReadinessProbe)
	probe := func(cmd []string) (int32, string) {
		t.Helper()
		code, out, err := p.exec(n, cmd)
		if err != nil {
			t.Fatalf("probe %q: %v", cmd, err)
		}
		return code, strings.TrimSpace(out)
	}
	prog, err := privtest.LoadSocketFilter("chart_live")
	privtest.Keep(t, prog, err)
	privtest.KeepRunning(t, prog, 20*time.Millisecond, 1)
	if out := p.started(t, n); !strings.HasPrefix(out, "ok: last tick ") {
		t.Fatalf("start-up probe of a running daemon: %q", out)
	}
	if code, out := probe(live); code != 0 || !strings.HasPrefix(out, "ok: last tick ") {
		t.Fatalf("liveness probe %q of a running daemon: exit %d %q", live, code, out)
	}

	bound := api.StaleAfter(250 * time.Millisecond) // renderFor's interval
	fz.Freeze(t)
	frozenAt := time.Now()
	var took time.Duration
	var line string
	for {
		code, out := probe(live)
		if code != 0 {
			took, line = time.Since(frozenAt), out
			break
		}
		if time.Since(frozenAt) > bound+5*time.Second {
			t.Fatalf("liveness probe passes %v after the store froze (bound %v): %q", time.Since(frozenAt).Round(time.Millisecond), bound, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("liveness probe failed %v after the freeze (bound %v): %s", took.Round(time.Millisecond), bound, line)
	if took < bound-time.Second || !strings.HasPrefix(line, "bpfperf: sampler stalled: last tick ") {
		t.Errorf("liveness probe failed %v after the freeze (bound %v) with %q: want sampler stalled, not before the bound", took, bound, line)
	}
	if code, out := probe(ready); code != 0 {
		t.Errorf("readiness probe %q with the sampler stalled: exit %d %q; want it to pass (the API answers)", ready, code, out)
	}

	if err := fz.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawedAt := time.Now()
	for {
		code, out := probe(live)
		if code == 0 {
			t.Logf("liveness probe passed %v after the thaw: %s", time.Since(thawedAt).Round(time.Millisecond), out)
			break
		}
		if time.Since(thawedAt) > 10*time.Second {
			t.Fatalf("liveness probe fails 10 s after the thaw: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
