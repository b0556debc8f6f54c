package cgroupid

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The kernel writes the paths of /proc/PID/cgroup relative to the
// reader's cgroup namespace: a daemon in a container with a cgroup
// namespace of its own (what containerd gives every container on a
// cgroup v2 node, the DaemonSet's included) reads another pod's cgroup as
// "/../../kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope".
// HostPath puts such a path back under the hierarchy's root, where the
// cgroup2 mount (the host's, which the chart mounts), the load records'
// cgroup ids and every other reader place it.

// HostPath is p, a cgroup v2 path read from /proc by this process, as the
// host's cgroup namespace names it. In the host's namespace, or where the
// namespace's root cannot be found, it is p unchanged.
func HostPath(p string) string {
	root := namespaceRoot()
	if root == "/" || p == "" {
		return p
	}
	return path.Join(root, p)
}

// namespaceRoot is where this process's cgroup namespace is rooted in
// the hierarchy, found once.
var namespaceRoot = sync.OnceValue(func() string {
	mount, err := Mount("/proc/self/mountinfo")
	if err != nil {
		return "/"
	}
	return findNamespaceRoot("/proc", mount, os.Getpid())
})

// findNamespaceRoot finds the cgroup this process's cgroup namespace is
// rooted at. Pid 1, the host's init where the daemon shares the host's
// pid namespace, reads as "/../.." + its own path from inside a namespace:
// the ".." components say how deep the root lies. The root is the
// directory at that depth under mount (the host's cgroup2 tree) holding
// this process's own cgroup with pid in its cgroup.procs. "/" where pid 1
// reads without ".." (the host's namespace, or a pid namespace of the
// daemon's own, whose processes all lie inside its cgroup namespace too)
// or nothing matches.
func findNamespaceRoot(procRoot, mount string, pid int) string {
	init, err1 := v2Path(filepath.Join(procRoot, "1", "cgroup"))
	self, err2 := v2Path(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err1 != nil || err2 != nil {
		return "/"
	}
	depth := 0
	for _, part := range strings.Split(strings.Trim(init, "/"), "/") {
		if part != ".." {
			break
		}
		depth++
	}
	if depth == 0 {
		return "/"
	}
	want := []byte(strconv.Itoa(pid))
	for _, dir := range dirsAtDepth(mount, depth) {
		procs, err := os.ReadFile(filepath.Join(mount, dir, self, "cgroup.procs"))
		if err == nil && slices.ContainsFunc(bytes.Fields(procs), func(f []byte) bool { return bytes.Equal(f, want) }) {
			return "/" + dir
		}
	}
	return "/"
}

// dirsAtDepth lists the directories depth levels below root, as paths
// relative to it.
func dirsAtDepth(root string, depth int) []string {
	level := []string{""}
	for range depth {
		var next []string
		for _, dir := range level {
			entries, err := os.ReadDir(filepath.Join(root, dir))
			if err != nil {
				continue
			}
			for _, e := range entries {
				if e.IsDir() {
					next = append(next, path.Join(dir, e.Name()))
				}
			}
		}
		level = next
	}
	return level
}

// v2Path is the cgroup v2 line's path ("0::/path") of a /proc cgroup file.
func v2Path(procFile string) (string, error) {
	b, err := os.ReadFile(procFile)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: no cgroup v2 line", procFile)
}

// PerfEventOnV1 says whether the perf_event controller is bound to a
// cgroup v1 hierarchy, by procFile (a /proc/PID/cgroup): a line
// "N:...perf_event...:/path" with N other than 0. Then a perf sample's
// cgroup (PERF_SAMPLE_CGROUP, the task's cgroup for perf_event) is an id
// in that hierarchy, which names nothing, or the wrong cgroup, under the
// cgroup2 mount.
func PerfEventOnV1(procFile string) bool {
	b, err := os.ReadFile(procFile)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		n, rest, _ := strings.Cut(line, ":")
		ctrls, _, _ := strings.Cut(rest, ":")
		if n != "0" && slices.Contains(strings.Split(ctrls, ","), "perf_event") {
			return true
		}
	}
	return false
}
