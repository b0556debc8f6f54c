package privtest

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LoadReturn loads `r0 = ret; exit` of typ for attach, closed when tb
// ends, and returns it with its id.
func LoadReturn(tb testing.TB, typ ebpf.ProgramType, attach ebpf.AttachType, ret int32) (*ebpf.Program, uint32) {
	tb.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "privtest_ret", Type: typ, AttachType: attach, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()},
	})
	return p, Keep(tb, p, err)
}

// PodPrograms are programs on a PodNetns's devices: a tcx link, an XDP
// link and a netlink TC filter (clsact ingress) on eth0 inside it, and a
// tcx link on the veth's host end, whose ifindex is eth0's.
type PodPrograms struct {
	NS                         PodNetns
	TCX, XDP, TC, Host         uint32 // program ids
	TCXLink, XDPLink, HostLink uint32 // link ids
}

// ProgramsInPodNetns makes a PodNetns (VethIntoNetns) and attaches
// PodPrograms, all gone when the test ends.
func ProgramsInPodNetns(tb testing.TB) PodPrograms {
	tb.Helper()
	s := PodPrograms{NS: VethIntoNetns(tb)}
	tcx, tcxID := LoadReturn(tb, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1) // TCX_NEXT
	xdp, xdpID := LoadReturn(tb, ebpf.XDP, ebpf.AttachNone, 2)             // XDP_PASS
	tc, tcID := LoadReturn(tb, ebpf.SchedCLS, ebpf.AttachNone, 0)          // TC_ACT_OK
	host, hostID := LoadReturn(tb, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1)
	s.TCX, s.XDP, s.TC, s.Host = tcxID, xdpID, tcID, hostID
	var links []link.Link
	tb.Cleanup(func() {
		for _, l := range links {
			l.Close()
		}
	})
	// A tcx or XDP link takes an ifindex of the caller's namespace.
	err := InNetns("/run/netns/"+s.NS.Name, func() error {
		l, err := link.AttachTCX(link.TCXOptions{Program: tcx, Interface: s.NS.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return fmt.Errorf("tcx on eth0: %w", err)
		}
		links = append(links, l)
		x, err := link.AttachXDP(link.XDPOptions{Program: xdp, Interface: s.NS.Index, Flags: link.XDPGenericMode})
		if err != nil {
			return fmt.Errorf("xdp on eth0: %w", err)
		}
		links = append(links, x)
		return FilterHere(s.NS.Index, tc, "privtest_pod") // gone with the namespace
	})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := link.AttachTCX(link.TCXOptions{Program: host, Interface: s.NS.Index, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		tb.Fatalf("tcx on the host end: %v", err)
	}
	links = append(links, h)
	s.TCXLink, s.XDPLink, s.HostLink = LinkID(tb, links[0]), LinkID(tb, links[1]), LinkID(tb, h)
	return s
}

// FilterHere adds a clsact qdisc to the device of ifindex in the calling
// thread's network namespace and prog as its direct-action ingress
// filter, as `tc filter add dev DEV ingress bpf da` does. They go when
// the device or its namespace goes.
func FilterHere(ifindex int, prog *ebpf.Program, name string) error {
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscAdd(q); err != nil {
		return fmt.Errorf("clsact on ifindex %d: %w", ifindex, err)
	}
	return netlink.FilterAdd(&netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd:          prog.FD(), Name: name, DirectAction: true,
	})
}

// LinkID is l's kernel id.
func LinkID(tb testing.TB, l link.Link) uint32 {
	tb.Helper()
	info, err := l.Info()
	if err != nil {
		tb.Fatal(err)
	}
	return uint32(info.ID)
}
