package pods_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/pods"
)

func TestMain(m *testing.M) { os.Exit(node.Main(m)) }

var loaderCaps = []string{"BPF", "PERFMON", "NET_ADMIN", "SYS_ADMIN"}

// TestIndexOnNode names real pods' containers by their cgroups: the
// oracle is what the test asked the CRI for and containerd's own record of
// the sandbox (ctr). A pod started after the index listed is found; one
// removed is gone once the listing is MaxAge old.
func TestIndexOnNode(t *testing.T) {
	n := node.Start(t)
	ctx := context.Background()
	deploy := n.RunPod(t, node.PodSpec{
		Namespace: "ns-a", Name: "loader-7d9f8b6c5-x2k4p",
		Labels:     map[string]string{"app": "loader", "pod-template-hash": "7d9f8b6c5"},
		Containers: []node.ContainerSpec{{Name: "loader", Caps: loaderCaps}, {Name: "sidecar"}},
	})
	now := time.Now()
	x, err := pods.Open(pods.Config{Socket: node.Socket, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()

	for _, c := range deploy.Containers {
		got, err := x.ByCgroup(ctx, cgroupOf(t, c))
		if err != nil {
			t.Fatalf("container %s: %v", c.Name, err)
		}
		p := got.Pod
		if got.ID != c.ID || got.Name != c.Name || p.Namespace != "ns-a" || p.Name != "loader-7d9f8b6c5-x2k4p" ||
			p.UID != deploy.UID || p.SandboxID != deploy.ID || p.Workload != (pods.Workload{Kind: "Deployment", Name: "loader"}) {
			t.Errorf("container %s %s: got %+v in %+v", c.Name, c.ID, got, p)
		}
	}
	sandbox, err := x.Container(ctx, deploy.ID)
	if err != nil || sandbox.Name != "" || sandbox.Pod.UID != deploy.UID {
		t.Errorf("sandbox %s: %+v %v", deploy.ID, sandbox, err)
	}
	checkWithCtr(t, deploy.ID, sandbox.Pod)
	if st := x.Status(); st.Err != nil || st.Containers != 3 || st.Dropped != 0 {
		t.Errorf("status after one pod: %+v", st)
	}

	// Started after the listing: a lookup lists again, at most every
	// MinInterval.
	ds := n.RunPod(t, node.PodSpec{
		Namespace: "kube-system", Name: "agent-4xq9z",
		Labels:     map[string]string{"app": "agent", "controller-revision-hash": "6b8f7d4c9", "pod-template-generation": "1"},
		Containers: []node.ContainerSpec{{Name: "agent", Caps: loaderCaps}},
	})
	agent := ds.Containers[0]
	if _, err := x.Container(ctx, agent.ID); !errors.Is(err, pods.ErrNotFound) {
		t.Errorf("a container started within MinInterval of the listing: %v, want ErrNotFound", err)
	}
	now = now.Add(time.Second)
	got, err := x.ByCgroup(ctx, cgroupOf(t, agent))
	if err != nil || got.Name != "agent" || got.Pod.Namespace != "kube-system" || got.Pod.Workload != (pods.Workload{Kind: "DaemonSet", Name: "agent"}) {
		t.Errorf("container started after the listing: %+v %v", got, err)
	}

	// Removed: found while the listing is young, gone once it is old.
	if err := n.RemovePod(ctx, deploy.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Container(ctx, deploy.Containers[0].ID); err != nil {
		t.Errorf("a removed container within MaxAge: %v", err)
	}
	now = now.Add(30 * time.Second)
	if _, err := x.Container(ctx, deploy.Containers[0].ID); !errors.Is(err, pods.ErrNotFound) {
		t.Errorf("a removed container after MaxAge: %v, want ErrNotFound", err)
	}
	if st := x.Status(); st.Containers != 2 {
		t.Errorf("status after the removal: %+v, want 2 containers", st)
	}
}

// TestIndexBound: past MaxContainers, what is dropped is counted.
func TestIndexBound(t *testing.T) {
	n := node.Start(t)
	p := n.RunPod(t, node.PodSpec{Namespace: "ns-a", Name: "bound", Containers: []node.ContainerSpec{{Name: "a"}, {Name: "b"}}})
	x, err := pods.Open(pods.Config{Socket: node.Socket, MaxContainers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	x.Container(context.Background(), p.ID)
	if st := x.Status(); st.Containers != 2 || st.Dropped != 1 {
		t.Errorf("status: %+v, want 2 kept and 1 dropped", st)
	}
}

// checkWithCtr compares p with the sandbox's metadata in containerd's own
// store (ctr), which the CRI plugin wrote when it made the sandbox: not
// the listing the index reads.
func checkWithCtr(t *testing.T, id string, p *pods.Pod) {
	t.Helper()
	out, err := exec.Command("ctr", "--address", node.Socket, "-n", "k8s.io", "containers", "info", id).Output()
	if err != nil {
		t.Fatalf("ctr containers info %s: %v", id, err)
	}
	var info struct {
		Extensions map[string]struct{ Value []byte } // base64 in the JSON
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("ctr containers info %s: %v", id, err)
	}
	var md struct {
		Metadata struct {
			ID     string
			Config struct {
				Metadata struct{ Name, Namespace, UID string }
				Labels   map[string]string
			}
		}
	}
	if err := json.Unmarshal(info.Extensions["io.cri-containerd.sandbox.metadata"].Value, &md); err != nil {
		t.Fatalf("sandbox metadata in ctr containers info %s: %v", id, err)
	}
	want := md.Metadata.Config
	if md.Metadata.ID != p.SandboxID || want.Metadata.Name != p.Name || want.Metadata.Namespace != p.Namespace ||
		want.Metadata.UID != p.UID || !maps.Equal(want.Labels, p.Labels) {
		t.Errorf("containerd's record of sandbox %s: %+v; the index: %+v", id, md.Metadata, p)
	}
}

// TestMissingSocket: one line, ErrNoSocket.
func TestMissingSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	_, err := pods.Open(pods.Config{Socket: sock})
	if !errors.Is(err, pods.ErrNoSocket) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open on a missing socket: %v", err)
	}
	t.Log(err)
}

// TestRefusingSocket: a socket file nobody listens on (a runtime that
// died) says so in one line.
func TestRefusingSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	x, err := pods.Open(pods.Config{Socket: sock, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	_, err = x.Container(context.Background(), strings.Repeat("ab", 32))
	if !errors.Is(err, pods.ErrUnavailable) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("lookup on a refusing socket: %v", err)
	}
	if st := x.Status(); !errors.Is(st.Err, pods.ErrUnavailable) {
		t.Errorf("status: %+v", st)
	}
	t.Log(err)
}

func cgroupOf(t *testing.T, c node.Container) string {
	t.Helper()
	cg, err := c.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}
