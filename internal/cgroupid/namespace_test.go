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

// TestPerfEventOnV1: /proc cgroup files as hybrid hosts write them, with
// perf_event on a v1 hierarchy alone or beside others, and on cgroup2.
func TestPerfEventOnV1(t *testing.T) {
	for text, want := range map[string]bool{
		"12:perf_event:/\n11:cpu,cpuacct:/system.slice\n0::/system.slice/x.service\n": true,
		"7:net_cls,net_prio,perf_event:/docker/abc\n0::/\n":                           true,
		"11:cpu,cpuacct:/\n1:name=systemd:/init.scope\n0::/init.scope\n":              false,
		"0::/system.slice/x.service\n":                                                false,
	} {
		f := filepath.Join(t.TempDir(), "cgroup")
		os.WriteFile(f, []byte(text), 0o644)
		if got := PerfEventOnV1(f); got != want {
			t.Errorf("PerfEventOnV1(%q) = %v, want %v", text, got, want)
		}
	}
}
