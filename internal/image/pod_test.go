package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestMain(m *testing.M) { os.Exit(node.Main(m)) }

// built is the image the tests share: built once per test binary.
var built struct {
	once    sync.Once
	archive string
	res     Result
	err     error
}

// testImage builds the image for amd64 and arm64 into a directory that
// lives as long as the test binary, once.
func testImage(t *testing.T) (archive string, res Result) {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "bpfperf-image-test-")
		if err != nil {
			built.err = err
			return
		}
		built.archive = filepath.Join(dir, "bpfperf-image.tar")
		built.res, built.err = Build(testConfig, filepath.Join(dir, "oci"), built.archive)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.archive, built.res
}

var testConfig = Config{Root: "../..", Platforms: []string{"linux/amd64", "linux/arm64"}, Version: "test", Commit: "abc", Created: time.Unix(1764000000, 0).UTC()}

// TestImageRunsAsPod imports the image into a real containerd (the test
// node: its CRI, runc) and runs bpfperfd from it as a pod's container,
// not privileged, with the capabilities BPF introspection needs. bpfperf
// run in the same container through the CRI's exec answers status, and
// its progs list a program the test loaded on the host, by id and name,
// as bpftool would: the daemon in the container sees the host's
// programs.
func TestImageRunsAsPod(t *testing.T) {
	privtest.Root(t)
	archive, _ := testImage(t)
	n := node.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := Name + ":" + testConfig.Version
	if err := n.Import(ctx, archive, ref); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("img_%d", os.Getpid()%100000)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, _ := prog.Info()
	id, _ := info.ID()

	pod := n.RunPod(t, node.PodSpec{Namespace: "bpfperf", Name: "bpfperf-image-test", Containers: []node.ContainerSpec{{
		Name:  "bpfperfd",
		Image: ref,
		Args:  []string{"--state-dir", "/var/lib/bpfperf", "--socket", "/run/bpfperf/api.sock", "--profile.every", "0"},
		Caps:  []string{"BPF", "PERFMON", "SYS_ADMIN"},
	}}})
	c := pod.Containers[0].ID
	cli := func(args ...string) (string, error) {
		r, err := n.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c, Timeout: 30,
			Cmd: append([]string{"/usr/local/bin/bpfperf", "--socket", "/run/bpfperf/api.sock"}, args...)})
		if err != nil {
			return "", err
		}
		if r.ExitCode != 0 {
			return "", fmt.Errorf("bpfperf %s: exit %d: %s%s", strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
		}
		return string(r.Stdout), nil
	}
	var status string
	var lastErr error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if status, lastErr = cli("status"); lastErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bpfperf status in the pod never answered: %v\nthe daemon's log:\n%s", lastErr, n.Log(ctx, c))
		}
	}
	t.Logf("$ bpfperf status (in the pod)\n%s", status)
	var rows []struct {
		ID   uint32 `json:"id"`
		Name string `json:"name"`
	}
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, lastErr = cli("progs", "-o", "json")
		if lastErr == nil && json.Unmarshal([]byte(out), &rows) == nil && slices.ContainsFunc(rows, func(r struct {
			ID   uint32 `json:"id"`
			Name string `json:"name"`
		}) bool {
			return r.ID == uint32(id) && r.Name == name
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bpfperf progs in the pod does not list program %d (%s) the test loaded: %v\n%s", id, name, lastErr, out)
		}
	}
	t.Logf("the pod's bpfperfd lists %d programs, program %d (%s) among them", len(rows), id, name)
}
