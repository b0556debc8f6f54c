package privtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

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
	m := made{fd: -1}
	m.err = InNetns("/run/netns/"+nsName, func() error {
		peer, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(peer); err != nil {
			return err
		}
		m.ifindex = peer.Attrs().Index
		m.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
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
			err := unix.Sendto(m.fd, frame, 0, to)
			// ENOBUFS: the device's queue is full behind a slow XDP
			// program on the other end (CI run 33); the frame is sent
			// again once it drains, so all n go.
			for tries := 0; err == unix.ENOBUFS && tries < 1000; tries++ {
				time.Sleep(time.Millisecond)
				err = unix.Sendto(m.fd, frame, 0, to)
			}
			if err != nil {
				return fmt.Errorf("send a frame from the namespace: %w", err)
			}
		}
		return nil
	}
}

// InNetns runs fn on an OS thread locked for it inside the network
// namespace of path (/run/netns/NAME, /proc/PID/ns/net), so that the netlink sockets
// it opens and the ifindexes it gives bpf(2) (tcx and XDP links) are
// that namespace's; the thread goes back to the caller's namespace
// after, or ends with its goroutine where it cannot.
func InNetns(path string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- err
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromPath(path)
		if err != nil {
			done <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			done <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			done <- fmt.Errorf("back to the caller's network namespace: %w", err)
			return // still locked: the thread goes with the goroutine
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// PodNetns is a network namespace set up as a pod's: a veth pair whose
// peer, eth0, sits in the namespace. Both ends have the same ifindex, so
// eth0's ifindex looked up in the host's namespace names the host end,
// another device.
type PodNetns struct {
	Name  string       // under /run/netns
	Host  netlink.Link // the veth's host end
	Index int          // eth0's ifindex in Name, and the host end's
}

// VethIntoNetns makes a PodNetns, removed when the test ends.
func VethIntoNetns(t testing.TB) PodNetns {
	t.Helper()
	tag := fmt.Sprintf("%04x", rand.Uint32()&0xffff)
	p := PodNetns{Name: "bpfperf-test-" + tag}
	if out, err := exec.Command("ip", "netns", "add", p.Name).CombinedOutput(); err != nil {
		Skip(t, fmt.Sprintf("ip netns add: %v: %s", err, out))
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.Name).Run() })
	host := "bpN" + tag
	var out []byte
	var err error
	for range 5 { // an index taken on the host: try another
		p.Index = 40000 + rand.IntN(20000)
		index := fmt.Sprint(p.Index)
		out, err = exec.Command("ip", "link", "add", host, "index", index, "type", "veth", "peer", "name", "eth0", "netns", p.Name, "index", index).CombinedOutput()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("ip link add %s type veth peer in %s: %v: %s", host, p.Name, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", host).Run() })
	if p.Host, err = netlink.LinkByName(host); err != nil {
		t.Fatal(err)
	}
	return p
}

// NetAttached is one program `bpftool net` lists on a device: Kind "xdp"
// or "tc" (netlink's filters; bpftool 7.3 and later list tcx links as
// "tc" with Dir "tcx/ingress"), Dir the qdisc's side ("clsact/ingress").
type NetAttached struct {
	Kind    string
	Devname string
	Ifindex int
	Dir     string
	ID      uint32
}

// BpftoolNet is what `bpftool net -j` lists, in the caller's network
// namespace for netns "", else through `ip netns exec NETNS`: the
// kernel's view through another implementation than ours, the oracle of
// the tests of netlink attachments and of devices in other namespaces.
func BpftoolNet(tb testing.TB, netns string) []NetAttached {
	tb.Helper()
	argv := []string{"bpftool", "net", "-j"}
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		tb.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	var doc []struct {
		XDP []struct {
			Devname string `json:"devname"`
			Ifindex int    `json:"ifindex"`
			ID      uint32 `json:"id"`
		} `json:"xdp"`
		TC []struct {
			Devname string `json:"devname"`
			Ifindex int    `json:"ifindex"`
			Kind    string `json:"kind"`
			ID      uint32 `json:"id"`
		} `json:"tc"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		tb.Fatalf("decode %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	var all []NetAttached
	for _, d := range doc {
		for _, x := range d.XDP {
			all = append(all, NetAttached{Kind: "xdp", Devname: x.Devname, Ifindex: x.Ifindex, ID: x.ID})
		}
		for _, f := range d.TC {
			all = append(all, NetAttached{Kind: "tc", Devname: f.Devname, Ifindex: f.Ifindex, Dir: f.Kind, ID: f.ID})
		}
	}
	return all
}

// NetkitIntoNetns makes a PodNetns whose pair is a netkit one, as Cilium's
// netkit mode makes a pod's: the primary (Host) out here, the peer, eth0,
// in the namespace, both of one ifindex as VethIntoNetns's ends are. The
// namespace is named under /run/netns, made with setns(2) rather than ip,
// which before iproute2 6.7 (bookworm has 6.1) does not know netkit, and
// the devices over netlink. It skips where the kernel has no netkit
// (CONFIG_NETKIT, Linux 6.7 and later).
func NetkitIntoNetns(t testing.TB) PodNetns {
	t.Helper()
	tag := fmt.Sprintf("%04x", rand.Uint32()&0xffff)
	p := PodNetns{Name: "bpfperf-test-" + tag}
	ns, err := newNamedNetns(p.Name)
	if err != nil {
		t.Fatalf("network namespace %s: %v", p.Name, err)
	}
	defer ns.Close()
	t.Cleanup(func() { netns.DeleteNamed(p.Name) })
	host := "nkN" + tag
	for range 5 { // an index taken on the host: try another
		p.Index = 40000 + rand.IntN(20000)
		nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: host, Index: p.Index}, Mode: netlink.NETKIT_MODE_L2}
		nk.SetPeerAttrs(&netlink.LinkAttrs{Name: "eth0", Index: p.Index, Namespace: netlink.NsFd(ns)})
		if err = netlink.LinkAdd(nk); err == nil || errors.Is(err, unix.EOPNOTSUPP) {
			break
		}
	}
	if errors.Is(err, unix.EOPNOTSUPP) {
		Skip(t, fmt.Sprintf("add a netkit device: %v (the kernel has no CONFIG_NETKIT)", err))
	}
	if err != nil {
		t.Fatalf("add netkit %s with its peer in %s: %v", host, p.Name, err)
	}
	if p.Host, err = netlink.LinkByName(host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.LinkDel(p.Host) })
	return p
}

// newNamedNetns makes a network namespace named name under /run/netns,
// as `ip netns add` does, and returns a handle to it; the caller's
// thread stays in its own.
func newNamedNetns(name string) (netns.NsHandle, error) {
	type made struct {
		ns  netns.NsHandle
		err error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- made{err: err}
			return
		}
		defer orig.Close()
		ns, err := netns.NewNamed(name) // enters it
		if serr := netns.Set(orig); serr != nil {
			done <- made{ns, fmt.Errorf("back to the caller's network namespace: %w", serr)}
			return // still locked: the thread goes with the goroutine
		}
		runtime.UnlockOSThread()
		done <- made{ns, err}
	}()
	m := <-done
	return m.ns, m.err
}
