// Package pods names containers by their Kubernetes pods: it reads the
// container runtime's CRI socket (containerd, CRI-O), which needs no RBAC,
// and maps a container id or cgroup path to namespace, pod, container and
// workload.
package pods

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	// ErrNoSocket is a CRI socket that does not exist: no runtime, or
	// another one.
	ErrNoSocket = errors.New("no such socket")
	// ErrUnavailable is a CRI socket that does not answer.
	ErrUnavailable = errors.New("not answering")
	// ErrNotFound is a container the runtime does not list.
	ErrNotFound = errors.New("no such container")
)

// DefaultSockets are where containerd and CRI-O put their CRI sockets.
var DefaultSockets = []string{"/run/containerd/containerd.sock", "/run/crio/crio.sock"}

// Config configures an Index.
type Config struct {
	Socket string // the CRI socket's path
	// Timeout bounds each CRI call; 2 s when 0.
	Timeout time.Duration
	// MaxAge is how old a listing may be for a found container; older,
	// the next lookup lists again, dropping pods since removed. 30 s when 0.
	MaxAge time.Duration
	// MinInterval is how often at most a container not listed lists
	// again: ids of containers from outside Kubernetes would otherwise
	// list on every lookup. 1 s when 0.
	MinInterval time.Duration
	// MaxContainers bounds the containers and sandboxes kept, 10,000 when
	// 0; past it the rest of a listing is dropped and Status says so.
	MaxContainers int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Pod is a pod as the CRI lists it.
type Pod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	UID       string            `json:"uid"`
	SandboxID string            `json:"sandbox_id"`
	Labels    map[string]string `json:"labels,omitempty"`
	Workload  Workload          `json:"workload"`
}

// Container is a container of a pod; a pod's sandbox (its pause
// container) is one with no Name.
type Container struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Pod  *Pod   `json:"pod"`
}

// Status is how the last listing went.
type Status struct {
	Socket     string
	Listed     time.Time // when the last listing succeeded
	Containers int       // containers and sandboxes kept
	Dropped    int       // past MaxContainers in the last listing
	Err        error     // the last listing's error, nil once one succeeds
}

// Index maps container ids to pods from the CRI's listings. It lists
// again when asked for a container it has not seen (at most every
// MinInterval) or when its listing is older than MaxAge, so it holds no
// more than one node's containers (and MaxContainers at most).
type Index struct {
	cfg    Config
	conn   *grpc.ClientConn
	client runtimeapi.RuntimeServiceClient

	listMu sync.Mutex // one listing at a time

	mu        sync.RWMutex
	byID      map[string]Container
	st        Status
	triedList time.Time
}

// Open returns an Index on cfg.Socket; the first lookup lists. It fails
// only when the socket does not exist (ErrNoSocket).
func Open(cfg Config) (*Index, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = 30 * time.Second
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Second
	}
	if cfg.MaxContainers == 0 {
		cfg.MaxContainers = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := checkSocket(cfg.Socket); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("cri socket %s: %w", cfg.Socket, err)
	}
	return &Index{cfg: cfg, conn: conn, client: runtimeapi.NewRuntimeServiceClient(conn), st: Status{Socket: cfg.Socket}}, nil
}

// Close closes the CRI connection.
func (x *Index) Close() error { return x.conn.Close() }

// Status says how the last listing went.
func (x *Index) Status() Status {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.st
}

// Container returns the container (or sandbox) with id, listing again
// when it is not known or the listing is old. The error is ErrNotFound,
// or the listing's (ErrNoSocket, ErrUnavailable, ...) when it failed.
func (x *Index) Container(ctx context.Context, id string) (Container, error) {
	now := x.cfg.Now()
	x.mu.RLock()
	c, ok := x.byID[id]
	fresh := now.Sub(x.st.Listed) < x.cfg.MaxAge
	tried := now.Sub(x.triedList) < x.cfg.MinInterval
	x.mu.RUnlock()
	if (ok && fresh) || (!ok && tried) {
		return x.found(c, ok)
	}
	err := x.list(ctx, now)
	x.mu.RLock()
	c, ok = x.byID[id]
	x.mu.RUnlock()
	if !ok && err != nil {
		return Container{}, err
	}
	return x.found(c, ok)
}

func (x *Index) found(c Container, ok bool) (Container, error) {
	if !ok {
		return Container{}, ErrNotFound
	}
	return c, nil
}

// ByCgroup returns the container whose cgroup path is cgroup (its id read
// by ContainerID); ErrNotFound when the path names no container.
func (x *Index) ByCgroup(ctx context.Context, cgroup string) (Container, error) {
	id, ok := ContainerID(cgroup)
	if !ok {
		return Container{}, ErrNotFound
	}
	return x.Container(ctx, id)
}

// list lists sandboxes and containers and replaces the index, unless
// another lookup listed since now.
func (x *Index) list(ctx context.Context, now time.Time) error {
	x.listMu.Lock()
	defer x.listMu.Unlock()
	x.mu.Lock()
	if !x.triedList.Before(now) {
		x.mu.Unlock()
		return x.st.Err
	}
	x.triedList = now
	x.mu.Unlock()

	byID, dropped, err := x.fetch(ctx)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.st.Err = err
	if err != nil {
		return err
	}
	x.byID = byID
	x.st.Listed, x.st.Containers, x.st.Dropped = now, len(byID), dropped
	return nil
}

func (x *Index) fetch(ctx context.Context) (map[string]Container, int, error) {
	if err := checkSocket(x.cfg.Socket); err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	sandboxes, err := x.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, 0, x.callError("list pods", err)
	}
	containers, err := x.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, 0, x.callError("list containers", err)
	}
	byID := make(map[string]Container, len(sandboxes.Items)+len(containers.Containers))
	pods := make(map[string]*Pod, len(sandboxes.Items))
	dropped := 0
	add := func(c Container) {
		if len(byID) >= x.cfg.MaxContainers {
			dropped++
			return
		}
		byID[c.ID] = c
	}
	for _, s := range sandboxes.Items {
		md := s.GetMetadata()
		p := &Pod{Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(), SandboxID: s.Id, Labels: s.Labels,
			Workload: WorkloadOf(md.GetName(), s.Labels)}
		pods[s.Id] = p
		add(Container{ID: s.Id, Pod: p})
	}
	for _, c := range containers.Containers {
		// A container of a sandbox listed a moment after the sandboxes
		// were has no pod here; the next listing finds both.
		if p := pods[c.PodSandboxId]; p != nil {
			add(Container{ID: c.Id, Name: c.GetMetadata().GetName(), Pod: p})
		}
	}
	return byID, dropped, nil
}

// checkSocket tells a socket that is not there in one line.
func checkSocket(socket string) error {
	if _, err := os.Stat(socket); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cri socket %s: %w (is containerd or CRI-O running?)", socket, ErrNoSocket)
	}
	return nil
}

// callError makes a failed call one line: gRPC's message for a socket
// that refuses nests the dialer's error in quotes and transport details.
func (x *Index) callError(what string, err error) error {
	if status.Code(err) != codes.Unavailable {
		return fmt.Errorf("cri %s: %s", what, status.Convert(err).Message())
	}
	conn, derr := net.DialTimeout("unix", x.cfg.Socket, x.cfg.Timeout)
	if derr == nil {
		conn.Close()
		derr = errors.New(status.Convert(err).Message())
	}
	var op *net.OpError
	if errors.As(derr, &op) {
		derr = op.Err
	}
	return fmt.Errorf("cri socket %s: %w: %v", x.cfg.Socket, ErrUnavailable, derr)
}

// ContainerID reads a container id from a cgroup path as the runtimes
// name them: the last element (cgroupfs), or a systemd scope
// cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope or
// libpod-<id>.scope, which podman may nest a "container" cgroup in.
func ContainerID(cgroup string) (string, bool) {
	base := path.Base(cgroup)
	if base == "container" {
		base = path.Base(path.Dir(cgroup))
	}
	if s, ok := strings.CutSuffix(base, ".scope"); ok {
		base = s[strings.LastIndexByte(s, '-')+1:]
	}
	if len(base) != 64 || strings.Trim(base, "0123456789abcdef") != "" {
		return "", false
	}
	return base, true
}
