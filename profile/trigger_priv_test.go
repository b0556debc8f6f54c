package profile

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestTriggersByCgroup: one tracepoint program, driven by two processes
// in two cgroups of the test's own, 3 getppid calls in one for 1 in the
// other: the profile charges the program's samples 3:1 (within 20%) to
// the two cgroups, by path, and almost none to anything else.
//
// Not in the test VM: there (Debian's 6.1 and 6.12, cgroup2 mounted
// alone) every sample carried the root cgroup's id, 1, though the drivers
// ran in their cgroups (their /proc/self/cgroup said so): see
// docs/triggers.md. The VM's emulated CPU would want less work and a
// longer capture, which the parameters below allow.
func TestTriggersByCgroup(t *testing.T) {
	iterations, calls, window := int32(20000), 100_000, 4*time.Second
	if vmtest.InVM() {
		iterations, calls, window = 2000, 20_000, 30*time.Second
	}
	privtest.Root(t)
	svc := privtest.MakeCgroup(t, "system.slice/bpfperf-trigger.service")
	pod := privtest.MakeCgroup(t, "kubepods-besteffort-pod0a1b2c3d_0000_4000_8000_00000000abcd.slice/cri-containerd-"+
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope")
	prog := privtest.GetppidTracepoint(t, "trigger_spin", iterations)
	id, _ := progID(t, prog)
	sym := NewSymbolizer(SymbolizerConfig{})
	if err := sym.Learn(id); err != nil {
		t.Fatal(err)
	}
	s := newSampler(t, SamplerConfig{Hz: 999})
	if !s.cgroups {
		t.Fatal("the kernel took no PERF_SAMPLE_CGROUP")
	}
	type capture struct {
		c   *Capture
		err error
	}
	done := make(chan capture)
	go func() {
		c, err := s.Capture(context.Background(), window)
		done <- capture{c, err}
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	privtest.GetppidThreeToOne(t, svc, pod, calls)
	if took := time.Since(start); took > window-time.Second {
		t.Fatalf("the drivers took %s, too long for a %s capture", took, window)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	p, err := Build(r.c, sym, BuildOptions{Cgroups: cgroupid.NewAt(cgroupRoot(t), nil)})
	if err != nil {
		t.Fatal(err)
	}
	triggers, err := ProgramTriggers(p)
	if err != nil {
		t.Fatal(err)
	}
	by := map[Trigger]int64{}
	var all int64
	for _, c := range triggers[id] {
		by[c.Trigger] = c.Samples
		all += c.Samples
	}
	nSvc, nPod := by[Trigger{ContextTask, svc.Path}], by[Trigger{ContextTask, pod.Path}]
	t.Logf("program %d: %d samples: %d in %s, %d in %s; all: %+v", id, all, nSvc, svc.Path, nPod, pod.Path, triggers[id])
	if nPod < 50 {
		t.Fatalf("%d samples in the pod's cgroup: too few to tell a ratio", nPod)
	}
	if ratio := float64(nSvc) / float64(nPod); math.Abs(ratio-3) > 0.6 {
		t.Errorf("split %d:%d = %.2f, want 3 within 20%%", nSvc, nPod, ratio)
	}
	if rest := all - nSvc - nPod; rest*20 > all {
		t.Errorf("%d of %d samples charged to neither cgroup", rest, all)
	}
}

func cgroupRoot(t *testing.T) string {
	t.Helper()
	root, err := cgroupid.Mount("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return root
}
