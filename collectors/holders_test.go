package collectors

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

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
		if got := CgroupPath(in); got != want {
			t.Errorf("CgroupPath(%q) = %q, want %q", in, got, want)
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

// TestHolderIterEqualsScan: the holders iterator finds what the /proc walk
// finds, every object and every holder: a map, a program and a link held
// here, and a program held by a child process that inherited its fd.
func TestHolderIterEqualsScan(t *testing.T) {
	privtest.Root(t)
	it, err := NewHolderIter()
	if err != nil {
		t.Fatalf("load holders iterator: %v", err)
	}
	defer it.Close()
	_, mapID := newTestMap(t, ebpf.Hash, 4, 10)
	_, progID := loadSocketFilter(t, "hold")
	shared, sharedID := loadSocketFilter(t, "shared")
	// The child gets a dup: an *os.File closes its fd when collected, and
	// must not close the program's own (a later test would find its
	// number reused).
	dup, err := unix.Dup(shared.FD())
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "prog")
	defer f.Close()
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()

	var got, want Holders
	for try := 0; try < 5; try++ {
		// Processes elsewhere on the host may come and go between the
		// two reads: a few tries for one pair that agree.
		if got, err = it.Scan("/proc"); err != nil {
			t.Fatal(err)
		}
		if want, err = ScanHolders("/proc"); err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(got, want) {
			break
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("holders iterator and /proc walk differ:\niterator %+v\n/proc    %+v", got, want)
	}
	self, kid := os.Getpid(), child.Process.Pid
	for _, c := range []struct {
		what   string
		owners []Owner
		pid    int
	}{
		{"map", got.Maps[mapID], self},
		{"program", got.Progs[progID], self},
		{"iterator's link", got.Progs[it.ProgramID()], self},
		{"program", got.Progs[sharedID], kid},
	} {
		if !slices.ContainsFunc(c.owners, func(o Owner) bool { return o.PID == c.pid }) {
			t.Errorf("%s holders %v do not include pid %d", c.what, c.owners, c.pid)
		}
	}
	if o := got.Progs[sharedID]; len(o) != 2 {
		t.Errorf("program shared with a child: holders %v, want this process and the child", o)
	}
}
