package podman

import "testing"

// TestContainerID: podman's cgroups under the cgroupfs and systemd
// managers, and one it nests; not conmon's, nor another runtime's.
func TestContainerID(t *testing.T) {
	const id = "b5ef1455fd0aab6cd941dc4a0156134af150fc59a5c3c695f4d4875b3d5a6ad4"
	for cgroup, want := range map[string]string{
		"/libpod_parent/libpod-" + id:                                        id,
		"/machine.slice/libpod-" + id + ".scope":                             id,
		"/machine.slice/libpod-" + id + ".scope/container":                   id,
		"/machine.slice/libpod-conmon-" + id + ".scope":                      "",
		"/system.slice/docker-" + id + ".scope":                              "",
		"/kubepods/besteffort/pod0f1e2d3c-aaaa-bbbb-cccc-111122223333/" + id: "",
		"/libpod_parent/libpod-" + id[:12]:                                   "",
	} {
		got, ok := ContainerID(cgroup)
		if got != want || ok != (want != "") {
			t.Errorf("ContainerID(%q) = %q, %v; want %q", cgroup, got, ok, want)
		}
	}
	var n *Names
	if got := n.Name("/libpod_parent/libpod-" + id); got != "" {
		t.Errorf("a nil Names named %q", got)
	}
}
