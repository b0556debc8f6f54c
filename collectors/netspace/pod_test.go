package netspace_test

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/netspace"
	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestMain(m *testing.M) { os.Exit(node.Main(m)) }

// TestPodEth0: on a real node (containerd's CRI, runc, the CNI bridge), a
// tcx link and a TC filter on a pod's own eth0 are placed in the pod's
// namespace, which CNI also mounts as /run/netns/cni-...: named "pod
// <uid>" from its processes' cgroup, and "pod NAMESPACE/NAME" where the
// Label hook knows the pod (what the container runtime's metadata will
// give, issue 43). The oracle is bpftool net run inside the pod's
// namespace.
func TestPodEth0(t *testing.T) {
	needTools(t)
	n := node.Start(t)
	p := n.RunPod(t, node.PodSpec{
		Namespace: "ns-a", Name: "loader-7d9f8b6c5-x2k4p",
		Labels:     map[string]string{"app": "loader", "pod-template-hash": "7d9f8b6c5"},
		Containers: []node.ContainerSpec{{Name: "loader"}},
	})
	nsPath := fmt.Sprintf("/proc/%d/ns/net", p.Containers[0].PID)
	fi, err := os.Stat(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	podIno := fi.Sys().(*syscall.Stat_t).Ino
	tcx, tcxID := load(t, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1)
	tc, tcID := load(t, ebpf.SchedCLS, ebpf.AttachNone, 0)
	var l link.Link
	var eth0 int
	err = privtest.InNetns(nsPath, func() error {
		dev, err := net.InterfaceByName("eth0") // a netlink dump in the thread's namespace
		if err != nil {
			return err
		}
		eth0 = dev.Index
		if l, err = link.AttachTCX(link.TCXOptions{Program: tcx, Interface: eth0, Attach: ebpf.AttachTCXIngress}); err != nil {
			return fmt.Errorf("tcx on the pod's eth0: %w", err)
		}
		return privtest.FilterHere(eth0, tc, "netspace_pod") // gone with the pod's namespace
	})
	if l != nil {
		defer l.Close()
	}
	if err != nil {
		t.Fatal(err)
	}

	if links, err := collectors.Links(); err == nil && len(links[tcxID]) == 1 {
		t.Logf("the pod's eth0 by its ifindex in the host's namespace: %s", links[tcxID][0].Target)
	}
	// The daemon's hook looks the pod up by the cgroup it is handed
	// (daemon/podnames): that must be a cgroup of this pod's.
	byPod := func(ino uint64, podCgroup string) netspace.Name {
		_, container := collectors.UnitAndContainer(podCgroup)
		if ino == podIno && strings.HasPrefix(container, "pod "+p.UID) {
			return netspace.Name{Label: "pod " + p.Spec.Namespace + "/" + p.Spec.Name, Key: "pod ns-a/Deployment/loader"}
		}
		return netspace.Name{}
	}
	for _, c := range []struct {
		label      netspace.Label
		netns, key string
	}{
		{nil, "pod " + p.UID, ""},
		{byPod, "pod ns-a/loader-7d9f8b6c5-x2k4p", "pod ns-a/Deployment/loader"},
	} {
		_, got := attachNow(t, nil, c.label)
		target := fmt.Sprintf("ifindex %d (eth0)", eth0)
		if want := []collectors.AttachPoint{{LinkID: privtest.LinkID(t, l), Type: "tcx", Target: target + " ingress", Netns: c.netns, NetnsKey: c.key}}; !reflect.DeepEqual(got[tcxID], want) {
			t.Errorf("tcx on the pod's eth0: %+v, want %+v", got[tcxID], want)
		}
		if want := []collectors.AttachPoint{{Type: "tc", Target: target + " ingress", Netns: c.netns, NetnsKey: c.key}}; !reflect.DeepEqual(got[tcID], want) {
			t.Errorf("tc filter on the pod's eth0: %+v, want %+v", got[tcID], want)
		}
		if len(got[tcxID]) == 1 {
			t.Logf("the pod's tcx link: %s", got[tcxID][0].NetnsTarget())
		}
	}

	// bpftool net inside the pod's namespace (nsenter by its pid).
	out, _, code := privtest.Exec("nsenter", "-t", strconv.Itoa(p.Containers[0].PID), "-n", "bpftool", "net", "-j")
	if want := fmt.Sprintf(`"devname":"eth0","ifindex":%d,"kind":"clsact/ingress","name":"netspace_pod","id":%d`, eth0, tcID); code != 0 || !strings.Contains(out, want) {
		t.Errorf("bpftool net in the pod (exit %d) does not list %s:\n%s", code, want, out)
	}
}
