package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/api"
)

// LoaderImage builds tploader (a container that loads and holds a
// tracepoint program) into an image of a name of its own, so that no image
// of older code left in the node's store is run; it is removed when the
// test ends (after its pods).
func (n *Node) LoaderImage(t testing.TB) string {
	t.Helper()
	ref := fmt.Sprintf("bpfperf.test/tploader:%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := n.ImportCommand(ctx, ref, "github.com/bpfperf/bpfperf/internal/node/tploader"); err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s built and imported in %s", ref, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		n.Images.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	})
	return ref
}

// TracepointID is the id of tracepoint group/name, from the host's
// tracefs, for tploader's arguments: the loader's container has none.
func TracepointID(t testing.TB, group, name string) string {
	t.Helper()
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if b, err := os.ReadFile(filepath.Join(dir, "events", group, name, "id")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no id of tracepoint %s/%s in tracefs", group, name)
	return ""
}

// PodNames is p's first container as the CRI names it (the oracle for
// what bpfperfd says of it), of workload.
func (n *Node) PodNames(t testing.TB, p *Pod, workload string) api.Pod {
	t.Helper()
	ctx := context.Background()
	ps, err := n.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.Containers[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	md := ps.GetStatus().GetMetadata()
	return api.Pod{Namespace: md.GetNamespace(), Pod: md.GetName(), UID: md.GetUid(), Container: cs.GetStatus().GetMetadata().GetName(),
		ContainerID: cs.GetStatus().GetId(), Workload: workload}
}
