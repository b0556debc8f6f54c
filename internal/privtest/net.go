package privtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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

// FramesFromNetns makes a veth pair whose peer sits in a network
// namespace of its own (VethsInNetns), sets both ends up, and returns the
// host end and a function that sends n raw Ethernet frames from the peer
// to it: what XDP and TC ingress programs on the host end see, with no
// addresses or neighbours to set up. The packet socket is opened in the
// namespace, on a thread locked for that and then returned to the host's.
func FramesFromNetns(t testing.TB) (netlink.Link, func(n int) error) {
	t.Helper()
	host := VethsInNetns(t, 1)[0]
	if err := netlink.LinkSetUp(host); err != nil {
		t.Fatal(err)
	}
	nsName := "bpfperf-test-" + host.Attrs().Name[3:7] // VethsInNetns's tag
	peerName := "bpP" + host.Attrs().Name[3:]
	type made struct {
		fd      int
		ifindex int
		err     error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		m := made{fd: -1}
		defer func() { done <- m }()
		orig, err := netns.Get()
		if err != nil {
			m.err = err
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromName(nsName)
		if err != nil {
			m.err = err
			return
		}
		defer ns.Close()
		if m.err = netns.Set(ns); m.err != nil {
			return
		}
		func() {
			peer, err := netlink.LinkByName(peerName)
			if err != nil {
				m.err = err
				return
			}
			if m.err = netlink.LinkSetUp(peer); m.err != nil {
				return
			}
			m.ifindex = peer.Attrs().Index
			m.fd, m.err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		}()
		if err := netns.Set(orig); err != nil {
			m.err = fmt.Errorf("back to the host's network namespace: %w", err)
			return // still locked: the thread goes with the goroutine
		}
		runtime.UnlockOSThread()
	}()
	m := <-done
	if m.err != nil {
		if m.fd >= 0 {
			unix.Close(m.fd)
		}
		t.Fatal(m.err)
	}
	t.Cleanup(func() { unix.Close(m.fd) })
	// 60 bytes: to the host end, from a made-up address, with the local
	// experimental EtherType, which no protocol on the host takes.
	frame := make([]byte, 60)
	copy(frame, host.Attrs().HardwareAddr)
	copy(frame[6:], []byte{0x02, 0, 0, 0, 0, 1})
	frame[12], frame[13] = 0x88, 0xb5
	to := &unix.SockaddrLinklayer{Ifindex: m.ifindex, Halen: 6}
	copy(to.Addr[:], host.Attrs().HardwareAddr)
	return host, func(n int) error {
		for range n {
			if err := unix.Sendto(m.fd, frame, 0, to); err != nil {
				return fmt.Errorf("send a frame from the namespace: %w", err)
			}
		}
		return nil
	}
}
