package collectors

import (
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestUnitAndContainer(t *testing.T) {
	const id = "4f1c0ffee4f1c0ffee4f1c0ffee4f1c0ffee4f1c0ffee4f1c0ffee4f1c0ffee0"
	for _, c := range []struct{ cgroup, unit, container string }{
		{"/system.slice/cilium.service", "cilium.service", ""},
		{"/user.slice/user-0.slice/session-3.scope", "session-3.scope", ""},
		{"/", "", ""},
		{"/system.slice/docker-" + id + ".scope", "docker-" + id + ".scope", id[:12]},
		{"/docker/" + id, "", id[:12]},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-" + id + ".scope",
			"cri-containerd-" + id + ".scope", "pod 1b2c3d4e-aaaa-bbbb-cccc-0123456789ab/" + id[:12]},
		{"/system.slice/falco.service/agent", "falco.service", ""},
	} {
		unit, container := UnitAndContainer(c.cgroup)
		if unit != c.unit || container != c.container {
			t.Errorf("UnitAndContainer(%q) = %q, %q; want %q, %q", c.cgroup, unit, container, c.unit, c.container)
		}
	}
}

func TestCgroupPath(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/cilium.service\n":                      "/system.slice/cilium.service",
		"12:pids:/docker/abc\n1:name=systemd:/docker/abc\n":      "/docker/abc",
		"1:name=systemd:/init.scope\n0::/system.slice/x.service": "/system.slice/x.service",
		"": "",
	} {
		if got := cgroupPath(in); got != want {
			t.Errorf("cgroupPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestScanHoldersMaps: a map this process holds is charged to it, and a
// program too, from one walk.
func TestScanHoldersMaps(t *testing.T) {
	privtest.Root(t)
	_, mapID := newTestMap(t, ebpf.Hash, 4, 10)
	_, progID := loadSocketFilter(t, "hold")
	h, err := ScanHolders("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for what, owners := range map[string][]Owner{"map": h.Maps[mapID], "program": h.Progs[progID]} {
		if !slices.ContainsFunc(owners, func(o Owner) bool { return o.PID == os.Getpid() }) {
			t.Errorf("%s holders %v do not include this process (%d)", what, owners, os.Getpid())
		}
	}
}
