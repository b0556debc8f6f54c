package hooks

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The network hooks see UDP packets sent from a network namespace of
// their own over a veth pair into this host's stack, to a socket bound on
// the host's end: the hooks sit on that end (XDP and TC ingress) and on
// that socket (the socket filter). The send runs the whole receive path
// in the sender's system call (the softirq runs when the send re-enables
// bottom halves), so the time per send covers the hook. The addresses are
// from 198.18.0.0/15, the range RFC 2544 sets aside for benchmarks.
var (
	hostAddr = net.IPv4(198, 18, 231, 1)
	peerAddr = net.IPv4(198, 18, 231, 2)
)

const udpPort = 40231

func netHooks() []hook {
	const event = "UDP packets over veth"
	return []hook{
		{"xdp", event, netSite(ebpf.XDP, 2 /* XDP_PASS */, func(p *ebpf.Program, v *veth) (io.Closer, error) {
			return link.AttachXDP(link.XDPOptions{Program: p, Interface: v.host.Attrs().Index})
		})},
		{"tc", event, netSite(ebpf.SchedCLS, 0 /* TCX_PASS */, func(p *ebpf.Program, v *veth) (io.Closer, error) {
			return link.AttachTCX(link.TCXOptions{Program: p, Interface: v.host.Attrs().Index, Attach: ebpf.AttachTCXIngress})
		})},
		// A socket filter returns how many bytes to keep: all of them.
		{"socket_filter", event, netSite(ebpf.SocketFilter, 0xffff, func(p *ebpf.Program, v *veth) (io.Closer, error) {
			if err := unix.SetsockoptInt(v.receiver, unix.SOL_SOCKET, unix.SO_ATTACH_BPF, p.FD()); err != nil {
				return nil, err
			}
			return closer(func() error { return unix.SetsockoptInt(v.receiver, unix.SOL_SOCKET, unix.SO_DETACH_BPF, 0) }), nil
		})},
	}
}

// netSite loads a program of type typ that returns ret, attached by
// attach to a fresh veth pair, and sends packets as its events.
func netSite(typ ebpf.ProgramType, ret int32, attach func(*ebpf.Program, *veth) (io.Closer, error)) func(Config) (*site, error) {
	return func(cfg Config) (*site, error) {
		prog, err := load(&ebpf.ProgramSpec{Type: typ}, ret)
		if err != nil {
			return nil, err
		}
		v, err := newVeth()
		if err != nil {
			prog.Close()
			return nil, fmt.Errorf("veth pair: %w", err)
		}
		l, err := attach(prog, v)
		if err != nil {
			v.close()
			prog.Close()
			return nil, refused("attach", err)
		}
		l.Close()
		return &site{
			prog:   prog,
			attach: func() (io.Closer, error) { return attach(prog, v) },
			fire:   v.send,
			events: cfg.Packets,
			close: func() {
				v.close()
				prog.Close()
			},
		}, nil
	}
}

// veth is the pair the packets cross: its host end, and the sockets.
type veth struct {
	host netlink.Link
	ns   netns.NsHandle
	// sender is a UDP socket in the namespace; receiver is bound on the
	// host's end, and never read: once its buffer is full the stack
	// drops what reaches it, in every round alike.
	sender, receiver int
	dst              unix.SockaddrInet4
	payload          []byte
}

func newVeth() (_ *veth, err error) {
	v := &veth{sender: -1, receiver: -1, ns: -1, payload: make([]byte, 18)}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	if v.ns, v.sender, err = socketInNewNetns(); err != nil {
		return nil, err
	}
	name, peer := fmt.Sprintf("bpfh%d", os.Getpid()%100000), fmt.Sprintf("bpfp%d", os.Getpid()%100000)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(v.ns)}); err != nil {
		return nil, fmt.Errorf("add %s: %w", name, err)
	}
	if v.host, err = netlink.LinkByName(name); err != nil {
		return nil, err
	}
	if err := netlink.AddrAdd(v.host, &netlink.Addr{IPNet: &net.IPNet{IP: hostAddr, Mask: net.CIDRMask(30, 32)}}); err != nil {
		return nil, fmt.Errorf("address %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(v.host); err != nil {
		return nil, err
	}
	if err := setUpPeer(v.ns, peer, v.host.Attrs().HardwareAddr); err != nil {
		return nil, err
	}
	if v.receiver, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, err
	}
	v.dst = unix.SockaddrInet4{Port: udpPort}
	copy(v.dst.Addr[:], hostAddr.To4())
	if err := unix.Bind(v.receiver, &v.dst); err != nil {
		return nil, fmt.Errorf("bind %s:%d: %w", hostAddr, udpPort, err)
	}
	return v, nil
}

// socketInNewNetns makes a network namespace and a UDP socket in it. A
// namespace is a property of the thread, so this runs on a thread of its
// own, locked to a goroutine of its own: should the thread fail to go
// back to the host's namespace, it ends with that goroutine instead of
// serving others from the wrong one.
func socketInNewNetns() (netns.NsHandle, int, error) {
	type made struct {
		ns  netns.NsHandle
		fd  int
		err error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		m := made{ns: -1, fd: -1}
		defer func() { done <- m }()
		orig, err := netns.Get()
		if err != nil {
			m.err = err
			return
		}
		defer orig.Close()
		ns, err := netns.New() // and the thread is in it
		if err != nil {
			m.err = fmt.Errorf("new network namespace: %w", err)
			return
		}
		fd, sockErr := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err := netns.Set(orig); err != nil {
			ns.Close()
			if sockErr == nil {
				unix.Close(fd)
			}
			m.err = fmt.Errorf("back to the host's network namespace: %w", err)
			return // still locked: the thread goes with the goroutine
		}
		runtime.UnlockOSThread()
		if sockErr != nil {
			ns.Close()
			m.err = sockErr
			return
		}
		m.ns, m.fd = ns, fd
	}()
	m := <-done
	return m.ns, m.fd, m.err
}

// setUpPeer gives the namespace's end its address and the host end's
// link-layer address, so that no neighbour lookup runs in a round.
func setUpPeer(ns netns.NsHandle, name string, hostMAC net.HardwareAddr) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	peer, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(peer, &netlink.Addr{IPNet: &net.IPNet{IP: peerAddr, Mask: net.CIDRMask(30, 32)}}); err != nil {
		return fmt.Errorf("address %s: %w", name, err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		return err
	}
	return h.NeighAdd(&netlink.Neigh{LinkIndex: peer.Attrs().Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: hostAddr, HardwareAddr: hostMAC})
}

// send sends n packets to the host's end.
func (v *veth) send(n int) error {
	for range n {
		if err := unix.Sendto(v.sender, v.payload, 0, &v.dst); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	return nil
}

func (v *veth) close() {
	if v.host != nil {
		netlink.LinkDel(v.host) // and its peer with it
	}
	for _, fd := range []int{v.sender, v.receiver} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if v.ns >= 0 {
		v.ns.Close() // the namespace goes with its last reference
	}
}
