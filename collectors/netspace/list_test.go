package netspace

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

func TestNsfsMounts(t *testing.T) {
	info := `22 1 0:21 / /proc rw,nosuid - proc proc rw
47 46 0:4 net:[4026532176] /run/netns/blue rw shared:2 - nsfs nsfs rw
48 46 0:4 net:[4026532300] /run/netns/cni-1f2e\040x rw shared:2 - nsfs nsfs rw
49 46 0:4 mnt:[4026532400] /run/mntns/a rw shared:2 - nsfs nsfs rw
50 46 0:4 net:[4026532500] /run/docker/netns/abc rw - nsfs nsfs rw
`
	want := []nsfsMount{{4026532176, "/run/netns/blue"}, {4026532300, "/run/netns/cni-1f2e x"}, {4026532500, "/run/docker/netns/abc"}}
	if got := nsfsMounts([]byte(info)); !reflect.DeepEqual(got, want) {
		t.Errorf("nsfsMounts = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"net:[]", "net:[12", "mnt:[12]", "net:[x]"} {
		if ino, ok := parseNsLink(bad); ok {
			t.Errorf("parseNsLink(%q) = %d, want not ok", bad, ino)
		}
	}
}

// fakeProc is a /proc with processes in network namespaces (pid → inode)
// and cgroups (pid → cgroup file), and mountinfo.
func fakeProc(t *testing.T, netns map[int]uint64, cgroups map[int]string, mountinfo string) string {
	t.Helper()
	root := t.TempDir()
	write := func(path, body string) {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "self/mountinfo"), mountinfo)
	for pid, ino := range netns {
		dir := filepath.Join(root, strconv.Itoa(pid), "ns")
		os.MkdirAll(dir, 0o755)
		if err := os.Symlink("net:["+strconv.FormatUint(ino, 10)+"]", filepath.Join(dir, "net")); err != nil {
			t.Fatal(err)
		}
	}
	for pid, cg := range cgroups {
		write(filepath.Join(root, strconv.Itoa(pid), "cgroup"), cg)
	}
	os.MkdirAll(filepath.Join(root, "self/ns"), 0o755)
	os.Symlink("net:[4026531840]", filepath.Join(root, "self/ns/net"))
	return root
}

// TestListAndLabel: namespaces are found by their bind mounts and their
// processes, each once, and named: by the hook first, then as a pod's
// (the uid from a process's cgroup, even where another process of the
// host came first), then by name under /run/netns, else by inode.
func TestListAndLabel(t *testing.T) {
	mountinfo := `47 46 0:4 net:[100] /run/netns/blue rw shared:2 - nsfs nsfs rw
48 46 0:4 net:[200] /run/netns/cni-7e1c rw shared:2 - nsfs nsfs rw
49 46 0:4 net:[600] /run/netns/hooked rw shared:2 - nsfs nsfs rw
`
	netns := map[int]uint64{1: 4026531840, 30: 200, 31: 200, 40: 300, 41: 400}
	cgroups := map[int]string{
		30: "0::/user.slice/user-0.slice/session-1.scope\n", // nsenter from the host
		31: "0::/kubepods/besteffort/pod0f1e2d3c-aaaa-bbbb-cccc-111122223333/4a5b6c7d8e9f00112233445566778899aabbccddeeff00112233445566778899\n",
		40: "12:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod7a6b5c4d_1111_2222_3333_444455556666.slice/cri-containerd-abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789.scope\n0::/\n",
		41: "0::/system.slice/foo.service\n",
	}
	root := fakeProc(t, netns, cgroups, mountinfo)
	nss, err := list(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]Namespace{}
	for _, ns := range nss {
		if _, dup := got[ns.Inode]; dup {
			t.Errorf("namespace %d listed twice", ns.Inode)
		}
		got[ns.Inode] = ns
	}
	if len(got) != 6 {
		t.Errorf("%d namespaces, want 6 (host, 3 mounted, 2 by processes only): %+v", len(got), nss)
	}
	if ns := got[200]; ns.Name != "cni-7e1c" || !reflect.DeepEqual(ns.PIDs, []int{30, 31}) {
		t.Errorf("namespace 200: %+v, want the name cni-7e1c and pids 30, 31", ns)
	}

	// The hook names 600, and is still asking for 200's pod.
	s := &Scanner{cfg: Config{ProcRoot: root, Label: func(ino uint64, _ string) Name {
		switch ino {
		case 600:
			return Name{Label: "pod ns-a/loader-7d9f8b6c5-x2k4p", Key: "pod ns-a/Deployment/loader"}
		case 200:
			return Name{Pending: true}
		}
		return Name{}
	}}}
	for ino, want := range map[uint64]Name{
		100: {Label: "netns blue"},
		200: {Label: "pod 0f1e2d3c-aaaa-bbbb-cccc-111122223333", Pending: true},
		300: {Label: "pod 7a6b5c4d-1111-2222-3333-444455556666"},
		400: {Label: "netns 400"},
		600: {Label: "pod ns-a/loader-7d9f8b6c5-x2k4p", Key: "pod ns-a/Deployment/loader"},
	} {
		if l := s.label(got[ino]); l != want {
			t.Errorf("label of namespace %d = %+v, want %+v", ino, l, want)
		}
	}
	if ino, err := selfInode(root); err != nil || ino != 4026531840 {
		t.Errorf("selfInode = %d, %v", ino, err)
	}
}
