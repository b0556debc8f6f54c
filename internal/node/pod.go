package node

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodSpec is a pod as a test asks for it: what a kubelet would hand the
// CRI for a pod of that name, namespace and labels.
type PodSpec struct {
	Namespace, Name string
	Labels          map[string]string
	Containers      []ContainerSpec
	// HostPID and HostNetwork share the host's pid and network
	// namespaces, as a pod spec's hostPID and hostNetwork do.
	HostPID, HostNetwork bool
}

// ContainerSpec is one container of a pod.
type ContainerSpec struct {
	Name    string
	Image   string   // IdleImage when empty
	Command []string // the image's entrypoint when empty
	Args    []string // the image's Cmd when empty
	Env     []string // KEY=value
	// Caps are added to the runtime's default set, named as in a pod
	// spec ("BPF", "NET_ADMIN"), DropCaps taken from it ("ALL" drops
	// every one, before Caps are added, as a pod spec's drop: [ALL]
	// does); the container is never privileged.
	Caps, DropCaps []string
	// Mounts bind host paths into the container (a host tool such as
	// execsnoop, which the image lacks), read-only unless Writable.
	Mounts []Mount
	// ReadOnlyRoot mounts the image's root file system read-only.
	ReadOnlyRoot bool
	// RunAsUser runs the container's processes as this uid (nil: the
	// image's user).
	RunAsUser *int64
	// NoNewPrivs is allowPrivilegeEscalation: false.
	NoNewPrivs bool
	// Seccomp is "RuntimeDefault" (the runtime's profile), or "" for
	// none (unconfined, the kubelet's default).
	Seccomp string
}

// Mount is a bind mount of a host path, read-only unless Writable. With
// HostToContainer, mounts made under Host later show in the container
// (rslave); the host's mount must be shared or slave, which Propagates
// tells.
type Mount struct {
	Host, Container string
	Writable        bool
	HostToContainer bool
}

// Pod is a running pod.
type Pod struct {
	ID           string // the sandbox id
	UID          string
	CgroupParent string // the cgroup (in every hierarchy) of its containers
	Spec         PodSpec
	Containers   []Container
	sandbox      *runtimeapi.PodSandboxConfig
}

// Container is a running container of a pod.
type Container struct {
	ID, Name string
	PID      int    // its first process, in the host's pid namespace
	Attempt  uint32 // restarts of the container before this one
}

// Kubelet's labels on sandboxes and containers.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

const callTimeout = 60 * time.Second

// RunPod runs a pod of spec and its containers, as a kubelet with the
// cgroupfs driver does: a cgroup parent /kubepods/besteffort/pod<uid>, the
// pod's labels and kubelet's own on the sandbox. The pod, its containers,
// netns and cgroups are removed when the test ends.
func (n *Node) RunPod(tb testing.TB, spec PodSpec) *Pod {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	p, err := n.runPod(ctx, spec)
	if p != nil {
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			if err := n.RemovePod(ctx, p.ID); err != nil {
				tb.Errorf("remove pod %s/%s: %v", spec.Namespace, spec.Name, err)
			}
		})
	}
	if err != nil {
		tb.Fatalf("run pod %s/%s: %v", spec.Namespace, spec.Name, err)
	}
	return p
}

func (n *Node) runPod(ctx context.Context, spec PodSpec) (*Pod, error) {
	uid := newUID()
	p := &Pod{UID: uid, CgroupParent: "/kubepods/besteffort/pod" + uid, Spec: spec}
	labels := map[string]string{labelPodName: spec.Name, labelPodNamespace: spec.Namespace, labelPodUID: uid, ownerLabel: strconv.Itoa(os.Getpid())}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	nsOpts := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if spec.HostPID {
		nsOpts.Pid = runtimeapi.NamespaceMode_NODE
	}
	if spec.HostNetwork {
		nsOpts.Network = runtimeapi.NamespaceMode_NODE
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: spec.Name, Namespace: spec.Namespace, Uid: uid},
		Hostname:     spec.Name,
		LogDirectory: filepath.Join(Dir, "logs", uid),
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    p.CgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: nsOpts},
		},
	}
	if spec.HostNetwork {
		// The host's UTS namespace comes with its network: a kubelet
		// names only pods with a network of their own.
		cfg.Hostname = ""
	}
	run, err := n.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		// A sandbox that failed half-way may have left its cgroup.
		return nil, errors.Join(err, removeCgroups(p.CgroupParent))
	}
	p.ID, p.sandbox = run.PodSandboxId, cfg
	for _, cs := range spec.Containers {
		c, err := n.startContainer(ctx, p, cs, 0)
		if err != nil {
			return p, fmt.Errorf("container %s: %w", cs.Name, err)
		}
		p.Containers = append(p.Containers, c)
	}
	return p, nil
}

func (n *Node) startContainer(ctx context.Context, p *Pod, cs ContainerSpec, attempt uint32) (Container, error) {
	img := cs.Image
	if img == "" {
		img = IdleImage
	}
	var mounts []*runtimeapi.Mount
	for _, m := range cs.Mounts {
		cm := &runtimeapi.Mount{HostPath: m.Host, ContainerPath: m.Container, Readonly: !m.Writable}
		if m.HostToContainer {
			cm.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
		}
		mounts = append(mounts, cm)
	}
	var envs []*runtimeapi.KeyValue
	for _, e := range cs.Env {
		k, v, _ := strings.Cut(e, "=")
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:     &runtimeapi.Capability{AddCapabilities: cs.Caps, DropCapabilities: cs.DropCaps},
		NamespaceOptions: p.sandbox.Linux.SecurityContext.NamespaceOptions,
		ReadonlyRootfs:   cs.ReadOnlyRoot,
		NoNewPrivs:       cs.NoNewPrivs,
	}
	if cs.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *cs.RunAsUser}
	}
	switch cs.Seccomp {
	case "":
	case "RuntimeDefault":
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	default:
		return Container{}, fmt.Errorf("seccomp %q: want RuntimeDefault or none", cs.Seccomp)
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: cs.Name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: img},
		Command:  cs.Command,
		Args:     cs.Args,
		Envs:     envs,
		Mounts:   mounts,
		LogPath:  fmt.Sprintf("%s/%d.log", cs.Name, attempt),
		Labels: map[string]string{labelContainerName: cs.Name, labelPodName: p.Spec.Name,
			labelPodNamespace: p.Spec.Namespace, labelPodUID: p.UID},
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: sc},
	}
	created, err := n.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.ID, Config: cfg, SandboxConfig: p.sandbox})
	if err != nil {
		return Container{}, err
	}
	c := Container{ID: created.ContainerId, Name: cs.Name, Attempt: attempt}
	if _, err := n.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ID}); err != nil {
		return c, err
	}
	c.PID, err = n.containerPID(ctx, c.ID)
	if err != nil {
		if st, _ := n.Status(ctx, c.ID); st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			// Gone already (a command that refused to run): a test
			// reads its exit code and log, as from a kubelet's pod.
			return c, nil
		}
	}
	return c, err
}

// Status is the CRI's status of container id.
func (n *Node) Status(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	st, err := n.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return nil, err
	}
	return st.GetStatus(), nil
}

// Log is what container id wrote to stdout and stderr, as the CRI logged
// it (a kubelet's `kubectl logs`), or why it cannot be read.
func (n *Node) Log(ctx context.Context, id string) string {
	st, err := n.Status(ctx, id)
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(st.GetLogPath())
	if err != nil {
		return fmt.Sprintf("exit %d, %s: %v", st.GetExitCode(), st.GetReason(), err)
	}
	return string(b)
}

// Propagates tells whether mounts made later under path on the host can
// show in a container (a HostToContainer mount): the host mount holding
// path must be shared or a slave. systemd makes / shared on a real node;
// a host without it keeps its mounts private, and the runtime refuses
// HostToContainer there.
func Propagates(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	best, shared := "", false
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "36 35 0:30 / /sys/fs/bpf rw,relatime shared:12 - bpf bpf rw"
		pre, _, ok := strings.Cut(s.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 6 {
			continue
		}
		mp := fields[4]
		if (path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, shared = mp, false
			for _, opt := range fields[6:] {
				if strings.HasPrefix(opt, "shared:") || strings.HasPrefix(opt, "master:") {
					shared = true
				}
			}
		}
	}
	return shared, s.Err()
}

// RestartContainer replaces the i-th container of p with a new one of the
// same spec, as a kubelet restarts a container that exited: stopped and
// removed, then created with the next attempt number. It has a new id
// and process; the pod stays.
func (n *Node) RestartContainer(ctx context.Context, p *Pod, i int) error {
	old := p.Containers[i]
	if _, err := n.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: old.ID, Timeout: 10}); err != nil {
		return err
	}
	if _, err := n.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: old.ID}); err != nil {
		return err
	}
	c, err := n.startContainer(ctx, p, p.Spec.Containers[i], old.Attempt+1)
	if err != nil {
		return err
	}
	p.Containers[i] = c
	return nil
}

// containerPID reads the pid containerd reports in the verbose status.
func (n *Node) containerPID(ctx context.Context, id string) (int, error) {
	st, err := n.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return 0, err
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.PID == 0 {
		return 0, fmt.Errorf("container %s: no pid in its status (%v)", id, err)
	}
	return info.PID, nil
}

// RemovePod stops and removes a pod with its containers, then its cgroups
// (a kubelet's job, which no kubelet does here) and log directory. A pod
// already gone is no error.
func (n *Node) RemovePod(ctx context.Context, id string) error {
	st, err := n.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if status.Code(err) == codes.NotFound {
		return nil // removed already: the test's own RemovePod, then its cleanup
	}
	if err != nil {
		return err
	}
	uid := st.GetStatus().GetMetadata().GetUid()
	if _, err := n.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return err
	}
	if _, err := n.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return err
	}
	return errors.Join(removeCgroups("/kubepods/besteffort/pod"+uid), os.RemoveAll(filepath.Join(Dir, "logs", uid)))
}

// removeAll removes the pods that match.
func (n *Node) removeAll(ctx context.Context, match func(*runtimeapi.PodSandbox) bool) error {
	list, err := n.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var errs []error
	for _, s := range list.Items {
		if match(s) {
			errs = append(errs, n.RemovePod(ctx, s.Id))
		}
	}
	return errors.Join(errs...)
}

// removeOrphans removes the pods of test processes that are gone (killed
// by a test timeout, say), so they do not pile up on a host.
func (n *Node) removeOrphans(ctx context.Context) {
	n.removeAll(ctx, func(s *runtimeapi.PodSandbox) bool {
		pid, err := strconv.Atoi(s.Labels[ownerLabel])
		return err != nil || unix.Kill(pid, 0) == unix.ESRCH
	})
}

// removeCgroups removes cgroup dir and its parents up to /kubepods, where
// empty, in every cgroup hierarchy: runc makes the parents of a container's
// cgroup and leaves them.
func removeCgroups(dir string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		for d := dir; d != "/"; d = filepath.Dir(d) {
			err := unix.Rmdir(filepath.Join(m, d))
			if d == dir && err != nil && err != unix.ENOENT {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", filepath.Join(m, d), err))
			}
			if err != nil && err != unix.ENOENT {
				break // a parent others still use
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts lists the mount points of the cgroup v1 and v2 hierarchies.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "36 35 0:30 / /sys/fs/cgroup/memory rw,... - cgroup cgroup rw,memory"
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(postFields) >= 1 && (postFields[0] == "cgroup" || postFields[0] == "cgroup2") {
			mounts = append(mounts, fields[4])
		}
	}
	return mounts, s.Err()
}

// newUID is a random UUID, as the API server gives a pod.
func newUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Cgroup is the container's cgroup v2 path, as the kernel tells it (the
// 0:: line of its process's /proc cgroup file).
func (c Container) Cgroup() (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.PID))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return path, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 line in /proc/%d/cgroup", c.PID)
}
