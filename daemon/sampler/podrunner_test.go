package sampler

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/identity"
)

// TestPreviousTagOfPodRunner (issue 43): a program of a pod named by its
// workload takes, as its previous version, an identity of that same pod
// settled by container ids (stored before pods had names, or while the
// CRI socket was down); a program of another pod, or of no pod, does not.
func TestPreviousTagOfPodRunner(t *testing.T) {
	s := NewFixture().Sampler
	old := "tracepoint/t at perf_event tracepoint sys_enter_getppid by container pod u1/aaaaaaaaaaaa"
	s.lastTag[old] = "aa"
	s.notePodRunner(old)
	s.notePodRunner(old) // kept once
	if n := len(s.podRunners["u1"]); n != 1 {
		t.Fatalf("%d identities kept for pod u1, want 1", n)
	}
	cur := identity.Identity{Type: "tracepoint", Name: "t", Attach: "perf_event tracepoint sys_enter_getppid", Runner: "k8s ns-a/Deployment/loader/loader"}
	if tag, ok := s.previousTag(cur, &collectors.Pod{UID: "u1"}); !ok || tag != "aa" {
		t.Errorf("in pod u1: previous tag %q, %v; want aa", tag, ok)
	}
	if tag, ok := s.previousTag(cur, &collectors.Pod{UID: "u2"}); ok {
		t.Errorf("in pod u2: previous tag %q, want none", tag)
	}
	if tag, ok := s.previousTag(cur, nil); ok {
		t.Errorf("in no pod: previous tag %q, want none", tag)
	}
	// Once the workload's own identity has a tag, that one is the last.
	s.lastTag[cur.Key()] = "bb"
	if tag, _ := s.previousTag(cur, &collectors.Pod{UID: "u1"}); tag != "bb" {
		t.Errorf("previous tag %q, want the workload identity's own, bb", tag)
	}
}

// TestDeviceOfPendingPodWaits (issue 43): a program on a device of a pod's
// network namespace, whose pod the CRI is being asked for, does not settle
// until the answer is in (the identity names the pod's workload there, the
// stand-in the pod's uid), nor past settleWait.
func TestDeviceOfPendingPodWaits(t *testing.T) {
	s := NewFixture().Sampler
	s.viewComplete = true
	now := time.Now()
	ap := collectors.AttachPoint{LinkID: 7, Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "pod 0f1e2d3c-aaaa-bbbb-cccc-111122223333", NetnsPending: true}
	p := &Program{meta: collectors.Meta{ID: 1, Attach: []collectors.AttachPoint{ap}}, firstSeen: now.Add(-time.Second)}
	if s.readyToSettle(p, now) {
		t.Error("settles while its device's pod is being asked for")
	}
	if !s.readyToSettle(p, now.Add(settleWait)) {
		t.Error("does not settle past settleWait")
	}
	ap.Netns, ap.NetnsKey, ap.NetnsPending = "pod ns-a/web-7d9f8b6c5-x2k4p", "pod ns-a/Deployment/web", false
	p.meta.Attach = []collectors.AttachPoint{ap}
	if !s.readyToSettle(p, now) {
		t.Error("does not settle once its device's pod is named")
	}
}
