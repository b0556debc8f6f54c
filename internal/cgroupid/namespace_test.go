package cgroupid

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFindNamespaceRoot: trees laid out as a node's /proc and cgroup2
// mount read from inside a container's cgroup namespace (the kernel's
// rendering: paths outside the namespace climb with ".."), and from the
// host's.
func TestFindNamespaceRoot(t *testing.T) {
	const pod = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234.slice/cri-containerd-abcd.scope"
	for _, c := range []struct {
		name, init, self, want string
	}{
		{"in a container, init at the root", "/../../../..", "/", "/" + pod},
		{"in a container, systemd's init.scope", "/../../../../init.scope", "/", "/" + pod},
		{"in a container, the daemon in a child cgroup", "/../../../..", "/daemon", "/" + pod},
		{"the host's namespace", "/init.scope", "/system.slice/bpfperfd.service", "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			proc, mount := t.TempDir(), t.TempDir()
			write := func(path, text string) {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(filepath.Join(proc, "1", "cgroup"), "0::"+c.init+"\n")
			write(filepath.Join(proc, "77", "cgroup"), "0::"+c.self+"\n")
			// Another pod at the same depth, and the daemon's own.
			write(filepath.Join(mount, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod9999.slice/cri-containerd-ffff.scope", c.self, "cgroup.procs"), "12\n770\n")
			write(filepath.Join(mount, pod, c.self, "cgroup.procs"), "5\n77\n")
			if got := findNamespaceRoot(proc, mount, 77); got != c.want {
				t.Errorf("root %q, want %q", got, c.want)
			}
		})
	}
}
