package node_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/internal/node"
)

func TestMain(m *testing.M) { os.Exit(node.Main(m)) }

// Capability bits (linux/capability.h).
const (
	capNetAdmin = 12
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// TestPod runs a Deployment-style pod whose container has the caps a BPF
// loader needs, checks it against the kernel's view (its process's cgroup,
// capabilities and network namespace) and containerd's own (ctr), and that
// removing it leaves no cgroup, netns or process.
func TestPod(t *testing.T) {
	n := node.Start(t)
	ctx := context.Background()
	spec := node.PodSpec{
		Namespace: "ns-a", Name: "loader-7d9f8b6c5-x2k4p",
		Labels:     map[string]string{"app": "loader", "pod-template-hash": "7d9f8b6c5"},
		Containers: []node.ContainerSpec{{Name: "loader", Caps: []string{"BPF", "PERFMON", "NET_ADMIN", "SYS_ADMIN"}}},
	}
	p := n.RunPod(t, spec)
	c := p.Containers[0]

	st, err := n.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	md := st.Status.Metadata
	if md.Namespace != "ns-a" || md.Name != spec.Name || md.Uid != p.UID || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("sandbox status: %v %v", md, st.Status.State)
	}
	if st.Status.Labels["pod-template-hash"] != "7d9f8b6c5" {
		t.Errorf("sandbox labels: %v", st.Status.Labels)
	}
	_, subnet, _ := net.ParseCIDR(node.Subnet)
	if ip := net.ParseIP(st.Status.GetNetwork().GetIp()); ip == nil || !subnet.Contains(ip) {
		t.Errorf("pod ip %q, want one in %s", st.Status.GetNetwork().GetIp(), node.Subnet)
	}

	// The kernel's view of the container's process.
	want := p.CgroupParent + "/" + c.ID
	if got, err := c.Cgroup(); err != nil || got != want {
		t.Errorf("container cgroup %q (%v), want %q", got, err, want)
	}
	eff := capEff(t, c.PID)
	for _, b := range []uint{capBPF, capPerfmon, capNetAdmin, capSysAdmin} {
		if eff&(1<<b) == 0 {
			t.Errorf("container lacks capability %d (CapEff %x)", b, eff)
		}
	}
	if eff == 1<<41-1 || eff == 1<<40-1 {
		t.Errorf("container is privileged (CapEff %x)", eff)
	}
	netns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", c.PID))
	hostNetns, _ := os.Readlink("/proc/self/ns/net")
	if netns == hostNetns {
		t.Errorf("container shares the host's netns %s", netns)
	}
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(c.PID), "-n", "ip", "-o", "addr", "show", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), st.Status.Network.Ip+"/") {
		t.Errorf("eth0 in the pod's netns: %v: %s", err, out)
	}

	// containerd's view, through ctr: the OCI spec runc was given.
	out, err = exec.Command("ctr", "--address", node.Socket, "-n", "k8s.io", "containers", "info", c.ID).Output()
	if err != nil {
		t.Fatalf("ctr containers info: %v", err)
	}
	if !strings.Contains(string(out), `"cgroupsPath": "`+want+`"`) || strings.Contains(string(out), `"CAP_SYS_MODULE"`) {
		t.Errorf("ctr containers info: want cgroupsPath %s and no CAP_SYS_MODULE:\n%s", want, out)
	}

	// Removed, nothing of it stays.
	if err := n.RemovePod(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", c.PID)); err == nil {
		t.Errorf("container process %d still runs", c.PID)
	}
	for _, dir := range cgroupDirs(t, p.CgroupParent) {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("cgroup %s stays", dir)
		}
	}
	if strings.HasPrefix(netns, "net:[") {
		if out, _ := exec.Command("lsns", "-t", "net", "-n", "-o", "NS").Output(); strings.Contains(string(out), strings.Trim(netns, "net:[]")) {
			t.Errorf("netns %s stays", netns)
		}
	}
	list, err := n.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: p.ID}})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("pod still listed: %v %v", list, err)
	}
}

// TestRestartContainer: a restarted container is a new container (id,
// process, cgroup) of the same pod, its attempt counted; a bind mount is
// there, read-only.
func TestRestartContainer(t *testing.T) {
	n := node.Start(t)
	ctx := context.Background()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "marker"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := n.RunPod(t, node.PodSpec{Namespace: "ns-a", Name: "restart", Containers: []node.ContainerSpec{
		{Name: "c", Mounts: []node.Mount{{Host: host, Container: "/host"}}}}})
	old := p.Containers[0]
	inContainer := fmt.Sprintf("/proc/%d/root/host/", old.PID)
	if b, err := os.ReadFile(inContainer + "marker"); string(b) != "from the host" {
		t.Errorf("bind mount: %q, %v", b, err)
	}
	if err := os.WriteFile(inContainer+"new", nil, 0o644); err == nil {
		t.Error("bind mount is writable")
	}

	if err := n.RestartContainer(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	c := p.Containers[0]
	if c.ID == old.ID || c.PID == old.PID || c.Attempt != 1 {
		t.Errorf("restarted: %+v, was %+v", c, old)
	}
	if got, err := c.Cgroup(); err != nil || got != p.CgroupParent+"/"+c.ID {
		t.Errorf("restarted container's cgroup %q (%v), want %s/%s", got, err, p.CgroupParent, c.ID)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", old.PID)); err == nil {
		t.Errorf("old container process %d still runs", old.PID)
	}
	for _, dir := range cgroupDirs(t, p.CgroupParent+"/"+old.ID) {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("old container's cgroup %s stays", dir)
		}
	}
	list, err := n.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: p.ID}})
	if err != nil || len(list.Containers) != 1 || list.Containers[0].Id != c.ID || list.Containers[0].Metadata.Attempt != 1 {
		t.Errorf("pod's containers after the restart: %v %v", list, err)
	}
}

// TestStartIsIdempotent: a second Start in the process is the same node.
func TestStartIsIdempotent(t *testing.T) {
	if node.Start(t) != node.Start(t) {
		t.Error("two nodes in one process")
	}
}

func capEff(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return eff
		}
	}
	t.Fatal("no CapEff")
	return 0
}

// cgroupDirs is dir in each cgroup hierarchy mounted under /sys/fs/cgroup.
func cgroupDirs(t *testing.T, dir string) []string {
	t.Helper()
	var dirs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), dir))
	}
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", dir))
	return dirs
}
