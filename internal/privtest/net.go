package privtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"

	"github.com/vishvananda/netlink"
)

// VethsInNetns makes a network namespace and n veth pairs whose peers sit
// in it, all removed when the test ends.
func VethsInNetns(t testing.TB, n int) []netlink.Link {
	t.Helper()
	tag := fmt.Sprintf("%04x", rand.Uint32()&0xffff)
	ns := "bpfperf-test-" + tag
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		Skip(t, fmt.Sprintf("ip netns add: %v: %s", err, out))
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	nsFile, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	var hosts []netlink.Link
	for i := range n {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: fmt.Sprintf("bpT%s%d", tag, i)},
			PeerName:      fmt.Sprintf("bpP%s%d", tag, i),
			PeerNamespace: netlink.NsFd(nsFile.Fd()),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			t.Fatalf("add veth %s: %v", veth.Name, err)
		}
		// Deleting either end deletes the pair; the peer also goes with
		// the namespace.
		t.Cleanup(func() { netlink.LinkDel(veth) })
		host, err := netlink.LinkByName(veth.Name)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, host)
	}
	return hosts
}

// AddClsact adds a clsact qdisc to dev, deleted when the test ends.
func AddClsact(t testing.TB, dev netlink.Link) {
	t.Helper()
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscAdd(q); err != nil {
		t.Fatalf("add clsact to %s: %v", dev.Attrs().Name, err)
	}
	t.Cleanup(func() { netlink.QdiscDel(q) })
}

// BpftoolPerf is one entry of `bpftool perf -j`: a program attached to a
// perf event a process holds (bpftool 7.1 names the tracepoint
// "tracepoint", not "tp_name").
type BpftoolPerf struct {
	PID        int    `json:"pid"`
	FD         int    `json:"fd"`
	ProgID     uint32 `json:"prog_id"`
	FDType     string `json:"fd_type"`
	Tracepoint string `json:"tracepoint"`
}
