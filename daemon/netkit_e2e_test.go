package daemon_test

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/netspace"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestNetkitEndToEnd: a netkit pair as Cilium's netkit mode makes a pod's,
// the primary out here and the peer, eth0, in a named network namespace,
// both of one ifindex; a program linked to each side through the primary.
// The kernel puts a peer link on the peer device (its link info gives
// eth0's ifindex, in the namespace) but answers BPF_PROG_QUERY for it on
// the primary only. The primary's program is named by the primary, as
// before; the peer's by the namespace and eth0, in netspace's result, in
// progs' WHERE, in the identity and in show. A second pair has both ends
// out here: its peer's program is named by the peer. The oracles: the
// kernel's link info read through cilium/ebpf, its query on the primary,
// and netlink in the namespace (eth0 is the primary's netkit peer).
func TestNetkitEndToEnd(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs netkit (this host's kernel has no CONFIG_NETKIT): runs in the 6.12 VM (TestKprobeMissedInVM)")
	}
	privtest.Root(t)
	ns := privtest.NetkitIntoNetns(t)
	primary := ns.Host.Attrs().Name
	type side struct {
		attach ebpf.AttachType
		prog   uint32
		link   uint32
	}
	sides := []*side{{attach: ebpf.AttachNetkitPrimary}, {attach: ebpf.AttachNetkitPeer}}
	for _, s := range sides {
		var prog *ebpf.Program
		prog, s.prog = privtest.LoadReturn(t, ebpf.SchedCLS, s.attach, -1) // NETKIT_NEXT
		l, err := link.AttachNetkit(link.NetkitOptions{Program: prog, Interface: ns.Index, Attach: s.attach})
		if err != nil {
			t.Fatalf("netkit %v link on %s: %v", s.attach, primary, err)
		}
		t.Cleanup(func() { l.Close() })
		s.link = privtest.LinkID(t, l)
		info, err := l.Info()
		if err != nil {
			t.Fatal(err)
		}
		// The kernel's link info: the device is the side's, whose ifindex
		// is ns.Index on both sides.
		nk := info.Netkit()
		if nk == nil || nk.Ifindex != uint32(ns.Index) || ebpf.AttachType(nk.AttachType) != s.attach {
			t.Fatalf("netkit %v link %d: kernel link info %+v, want ifindex %d", s.attach, s.link, nk, ns.Index)
		}
		t.Logf("program %d, link %d through %s: the kernel's link info says ifindex %d, %v", s.prog, s.link, primary, nk.Ifindex, s.attach)
	}
	prim, peer := sides[0], sides[1]
	// The second pair, and a program on its peer.
	tag := strings.TrimPrefix(ns.Name, "bpfperf-test-")
	local, localPeer := "nkL"+tag, "nkM"+tag
	nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: local}, Mode: netlink.NETKIT_MODE_L2}
	nk.SetPeerAttrs(&netlink.LinkAttrs{Name: localPeer})
	if err := netlink.LinkAdd(nk); err != nil {
		t.Fatalf("add netkit %s with its peer %s: %v", local, localPeer, err)
	}
	t.Cleanup(func() { netlink.LinkDel(nk) })
	lp, err := netlink.LinkByName(localPeer)
	if err != nil {
		t.Fatal(err)
	}
	localProg, localID := privtest.LoadReturn(t, ebpf.SchedCLS, ebpf.AttachNetkitPeer, -1)
	ll, err := link.AttachNetkit(link.NetkitOptions{Program: localProg, Interface: nk.Attrs().Index, Attach: ebpf.AttachNetkitPeer})
	if err != nil {
		t.Fatalf("netkit peer link on %s: %v", local, err)
	}
	t.Cleanup(func() { ll.Close() })
	localLink := privtest.LinkID(t, ll)
	if info, err := ll.Info(); err != nil || info.Netkit() == nil || info.Netkit().Ifindex != uint32(lp.Attrs().Index) {
		t.Fatalf("netkit peer link %d on %s: kernel link info %+v (%v), want %s's ifindex %d", localLink, local, info, err, localPeer, lp.Attrs().Index)
	}
	t.Logf("program %d, link %d through %s (ifindex %d): the kernel's link info says ifindex %d, %s's", localID, localLink, local, nk.Attrs().Index, lp.Attrs().Index, localPeer)
	// The kernel lists the peer's link on the primary, and eth0 in the
	// namespace is the primary's peer.
	res, err := link.QueryPrograms(link.QueryOptions{Target: ns.Index, Attach: ebpf.AttachNetkitPeer})
	if err != nil {
		t.Fatalf("query %s's peer programs: %v", primary, err)
	}
	if ids := linkIDs(res); !slices.Equal(ids, []uint32{peer.link}) {
		t.Fatalf("the kernel lists links %v on %s's peer, want %d", ids, primary, peer.link)
	}
	t.Logf("the kernel's query on %s (ifindex %d) for its peer lists link %d", primary, ns.Index, peer.link)
	err = privtest.InNetns("/run/netns/"+ns.Name, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if eth0.Type() != "netkit" || eth0.Attrs().Index != ns.Index || eth0.Attrs().ParentIndex != ns.Index {
			return fmt.Errorf("eth0 in the namespace: %s, ifindex %d, peer ifindex %d; want netkit, %d, %d", eth0.Type(), eth0.Attrs().Index, eth0.Attrs().ParentIndex, ns.Index, ns.Index)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// netspace, as the daemon's owners scan calls it.
	links, err := collectors.Links()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := netspace.New(netspace.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.Attach(links, true)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	in := "netns " + ns.Name
	for id, want := range map[uint32][]collectors.AttachPoint{
		prim.prog: {{LinkID: prim.link, Type: "netkit", Target: fmt.Sprintf("ifindex %d (%s) primary", ns.Index, primary)}},
		peer.prog: {{LinkID: peer.link, Type: "netkit", Target: fmt.Sprintf("ifindex %d (eth0) peer", ns.Index), Netns: in}},
		localID:   {{LinkID: localLink, Type: "netkit", Target: fmt.Sprintf("ifindex %d (%s) peer", lp.Attrs().Index, localPeer)}},
	} {
		if !reflect.DeepEqual(got[id], want) {
			t.Errorf("netspace: program %d: %+v, want %+v", id, got[id], want)
		}
	}

	// The daemon.
	d := startDaemon(t, t.TempDir())
	rows := settledRows(t, d, prim.prog, peer.prog, localID)
	for id, want := range map[uint32]string{
		prim.prog: "netkit dev " + primary + " primary",
		peer.prog: "netkit " + in + " eth0 peer",
		localID:   "netkit dev " + localPeer + " peer",
	} {
		r := rows[id]
		t.Logf("program %d: WHERE %q, identity %q", id, r.Where, r.Identity)
		if r.Where != want {
			t.Errorf("progs: program %d: where %q, want %q", id, r.Where, want)
		}
		if !strings.Contains(r.Identity, " at "+want) {
			t.Errorf("progs: program %d: identity %q, want it at %q", id, r.Identity, want)
		}
	}
	out := d.cli(t, "show", strconv.FormatUint(uint64(peer.prog), 10))
	if want := fmt.Sprintf("netkit ifindex %d (eth0) peer in %s (link %d)", ns.Index, in, peer.link); !strings.Contains(out, want) {
		t.Errorf("show does not say %q:\n%s", want, out)
	}
}

// linkIDs are the link ids of a query's programs.
func linkIDs(res *link.QueryResult) []uint32 {
	var ids []uint32
	for _, p := range res.Programs {
		if id, ok := p.LinkID(); ok {
			ids = append(ids, uint32(id))
		}
	}
	return ids
}
