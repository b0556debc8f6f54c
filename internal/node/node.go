// Package node runs a real container node for tests: Debian's containerd
// with its CRI plugin, runc and the CNI bridge and host-local plugins, on a
// socket, config and state of its own (under Dir and Root), and drives pods
// through the CRI API as a kubelet would. Images are built here (BuildImage)
// and imported: no registry is reachable.
//
// A test binary's TestMain calls Main; tests call Start. The first Start of
// a process installs what is missing and starts containerd unless one from
// another test binary already answers; the last process to let go of the
// node stops it (a shared flock tells who is last).
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/internal/debpkg"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// Packages are the Debian packages the node needs.
var Packages = []string{"containerd", "runc", "containernetworking-plugins"}

const (
	// Dir holds what lives as long as the node: containerd's socket,
	// state, log, the CNI config and IP leases, pod logs, the lock.
	Dir = "/run/bpfperf-test/node"
	// Root is containerd's root: images and snapshots, kept between
	// runs so that a node starts without importing again.
	Root = "/var/lib/bpfperf-test/containerd"
	// Socket is the node's CRI (and containerd) socket.
	Socket = Dir + "/containerd.sock"
	// Bridge is the CNI bridge the pods' veths join.
	Bridge = "bpfperf0"
	// Subnet is the pods' addresses: one no host route here uses.
	Subnet = "10.213.0.0/24"

	// PauseImage is the sandbox image, IdleImage a container's that only
	// waits (both the idle command).
	PauseImage = "bpfperf.test/pause:1"
	IdleImage  = "bpfperf.test/idle:1"

	// ownerLabel marks a test pod with its test process's pid, so a
	// later Start removes what a killed process left.
	ownerLabel = "bpfperf.test/owner-pid"

	startTimeout = 60 * time.Second
)

// Node is a running node: its CRI clients.
type Node struct {
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	conn    *grpc.ClientConn
}

var (
	mu      sync.Mutex
	inMain  bool
	shared  *Node
	failed  error
	lock    *os.File // held shared while this process uses the node
	started bool     // this process started containerd (for the log)
)

// Main runs the tests of m and lets go of the node afterwards, stopping it
// when no other process uses it. Call it from TestMain: os.Exit(node.Main(m)).
func Main(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	if err := release(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start returns the node, starting it on first use in this process. It
// skips the test when not root (fails under BPFPERF_REQUIRE_PRIVILEGED=1)
// and fails it when the node cannot start.
func Start(tb testing.TB) *Node {
	tb.Helper()
	if os.Geteuid() != 0 {
		privtest.Skip(tb, "a container node needs root")
	}
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		tb.Fatal("node.Start without node.Main in TestMain: nothing would stop the node")
	}
	if shared == nil && failed == nil {
		shared, failed = start()
	}
	if failed != nil {
		tb.Fatalf("start node: %v", failed)
	}
	return shared
}

func start() (*Node, error) {
	if err := debpkg.Ensure("node", Packages...); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// Exclusive while starting, so two processes do not start two
	// containerds; then shared for as long as this process uses it.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("node lock: %w", err)
	}
	n, err := startLocked()
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH)
	}
	if err != nil {
		if started {
			// Still exclusive: no other process uses what we started.
			err = errors.Join(err, stopContainerd())
		}
		f.Close()
		return nil, err
	}
	lock = f
	return n, nil
}

func startLocked() (*Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n, err := dial()
	if err != nil {
		return nil, err
	}
	if n.ready(ctx) != nil {
		if err := launch(); err != nil {
			n.conn.Close()
			return nil, err
		}
		started = true
		if err := n.waitReady(ctx); err != nil {
			n.conn.Close()
			return nil, fmt.Errorf("%w (log: %s)", err, lastLines(filepath.Join(Dir, "containerd.log"), 5))
		}
	}
	n.removeOrphans(ctx)
	// A first build of the idle command may take minutes on a busy host
	// (the toolchain builds its std library static); the rest is quick.
	bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer bcancel()
	if err := n.ensureImages(bctx); err != nil {
		n.conn.Close()
		return nil, err
	}
	return n, nil
}

func dial() (*Node, error) {
	conn, err := grpc.NewClient("unix://"+Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("cri client: %w", err)
	}
	return &Node{Runtime: runtimeapi.NewRuntimeServiceClient(conn), Images: runtimeapi.NewImageServiceClient(conn), conn: conn}, nil
}

// ready tells whether the CRI answers with runtime and network ready: the
// network condition turns true only once the CNI config loaded.
func (n *Node) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := n.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return err
	}
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			return fmt.Errorf("cri %s: %s", c.Type, c.Message)
		}
	}
	return nil
}

func (n *Node) waitReady(ctx context.Context) error {
	for {
		err := n.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd not ready in %v: %v", startTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// launch writes the configs and starts containerd in a session of its own,
// so it outlives this process when another test binary still uses it.
func launch() error {
	for _, d := range []string{Root, filepath.Join(Dir, "cni"), filepath.Join(Dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(Dir, "config.toml"), []byte(containerdConfig), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(Dir, "cni", "10-bpfperf-test.conflist"), []byte(cniConfig), 0o644); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("containerd", "--config", filepath.Join(Dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return os.WriteFile(filepath.Join(Dir, "containerd.pid"), []byte(strconv.Itoa(pid)), 0o644)
}

// release lets go of the node; when no other process holds it, it removes
// every pod left, stops containerd and removes the bridge.
func release() error {
	mu.Lock()
	defer mu.Unlock()
	if lock == nil {
		return nil
	}
	defer func() { lock.Close(); lock = nil }()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		shared.conn.Close()
		return nil // another test binary uses it: it stops it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := []error{shared.removeAll(ctx, func(*runtimeapi.PodSandbox) bool { return true })}
	shared.conn.Close()
	errs = append(errs, stopContainerd(), deleteBridge())
	// The lock stays (a process may wait on it), and containerd's log
	// for a look after a failure; Root keeps the images.
	for _, name := range []string{"state", "ipam", "cni", "logs", "config.toml", "containerd.sock.ttrpc"} {
		errs = append(errs, os.RemoveAll(filepath.Join(Dir, name)))
	}
	return errors.Join(errs...)
}

func stopContainerd() error {
	pidFile := filepath.Join(Dir, "containerd.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	// The pid is only ours while its command line still names our config.
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if strings.Contains(string(cmdline), filepath.Join(Dir, "config.toml")) {
		unix.Kill(pid, unix.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
	return os.Remove(pidFile)
}

// alive tells whether pid runs. It reaps pid when it is this process's
// child (the process that started containerd stops it too): a zombie
// still answers kill(pid, 0).
func alive(pid int) bool {
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	return unix.Kill(pid, 0) == nil
}

func deleteBridge() error {
	if _, err := os.Stat("/sys/class/net/" + Bridge); err != nil {
		return nil
	}
	if b, err := exec.Command("ip", "link", "del", Bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link del %s: %v: %s", Bridge, err, b)
	}
	return nil
}

func lastLines(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// containerdConfig keeps the node apart from any containerd of the host:
// its own root, state, sockets and plugin dirs.
var containerdConfig = `version = 2
root = "` + Root + `"
state = "` + Dir + `/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "` + Socket + `"

[ttrpc]
  address = "` + Socket + `.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "` + Root + `/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  # root here lacks CAP_SYS_RESOURCE: runc cannot write the sandbox's
  # oom_score_adj of -998 ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # No systemd here: cgroupfs, so pods need a cgroup_parent.
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "` + Dir + `/cni"
`

// cniConfig is a bridge with host-local addresses; no masquerade, so no
// iptables rules to undo.
var cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "bpfperf-test",
  "plugins": [{
    "type": "bridge",
    "bridge": "` + Bridge + `",
    "isGateway": true,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "` + Subnet + `"}]],
      "dataDir": "` + Dir + `/ipam"
    }
  }]
}
`
