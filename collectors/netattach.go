package collectors

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// dumpTries bounds how often a netlink dump is retried when the kernel
// says the table changed while it was read (NLM_F_DUMP_INTR).
const dumpTries = 3

// NetDevice is one network device of a namespace.
type NetDevice struct {
	Index int
	Name  string
	Kind  string   // its driver's link kind ("veth", "netkit"); "" for most hardware
	xdp   []uint32 // program ids, one per attach mode in use
	// Peer is the ifindex of a veth's or netkit's other end (IFLA_LINK),
	// in that end's namespace, which is another where PeerNetns
	// (IFLA_LINK_NETNSID); 0 for none.
	Peer      int
	PeerNetns bool
	// Primary says a netkit device is its pair's primary: the kernel
	// attaches and lists the programs of both ends through the primary
	// (BPF_PROG_QUERY on the peer fails with EACCES).
	Primary bool
}

// NetAttach returns, by program id, the programs attached through netlink
// in the calling thread's network namespace, as `bpftool net` lists them:
// BPF filters of a clsact or ingress qdisc (Type "tc", Target "ifindex 6
// (bv1) ingress" or "... egress") and XDP programs in any mode (Type
// "xdp", Target "ifindex 6 (bv1)"). Targets read as a tcx or xdp link's do
// in Links, so the two compare; LinkID is 0.
//
// XDP programs attached through a bpf_link are listed too, as bpftool net
// lists them: netlink cannot tell them apart, and MergeAttach, which adds
// the result to Links', lists each once (with its link). TC filters never
// have a link: tcx links are a separate hook. Requires Linux 4.13 (XDP
// program ids).
func NetAttach() (map[uint32][]AttachPoint, error) {
	_, out, err := NetView()
	return out, err
}

// NetView is NetAttach with the devices it read, for a caller that looks
// further at them (collectors/netspace asks each for its tcx and netkit
// links): one dump of the namespace's devices serves both.
func NetView() ([]NetDevice, map[uint32][]AttachPoint, error) {
	devs, err := retryDump(netDevices)
	if err != nil {
		return nil, nil, fmt.Errorf("list network devices: %w", err)
	}
	out := make(map[uint32][]AttachPoint)
	for _, dev := range devs {
		for _, id := range dev.xdp {
			out[id] = appendNew(out[id], AttachPoint{Type: "xdp", Target: ifaceTarget(dev.Index, dev.Name)})
		}
	}
	if err := addTC(out, devs); err != nil {
		return nil, nil, err
	}
	return devs, out, nil
}

// XDPProgs are the ids of the programs XDP runs on dev, one per mode.
func (dev NetDevice) XDPProgs() []uint32 { return dev.xdp }

// netDevices dumps the namespace's devices with their XDP programs. It
// reads the per-mode program ids itself, where netlink.LinkList would
// decode every attribute of every device: netlink.LinkXdp keeps only
// IFLA_XDP_PROG_ID, which the kernel leaves out when two modes run
// programs at once (one offloaded to the NIC beside a driver or generic
// one; driver and generic together the kernel refuses).
func netDevices() ([]NetDevice, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return nil, err
	}
	devs := make([]NetDevice, 0, len(msgs))
	for _, m := range msgs {
		ifi := nl.DeserializeIfInfomsg(m)
		attrs, err := nl.ParseRouteAttr(m[ifi.Len():])
		if err != nil {
			return nil, fmt.Errorf("parse link message: %w", err)
		}
		dev := NetDevice{Index: int(ifi.Index)}
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFLA_IFNAME:
				dev.Name = cString(a.Value)
			case unix.IFLA_XDP:
				if dev.xdp, err = xdpProgIDs(a.Value); err != nil {
					return nil, fmt.Errorf("parse xdp of ifindex %d: %w", dev.Index, err)
				}
			case unix.IFLA_LINKINFO:
				dev.Kind, dev.Primary = linkKind(a.Value)
			case unix.IFLA_LINK:
				if len(a.Value) >= 4 {
					dev.Peer = int(binary.NativeEndian.Uint32(a.Value))
				}
			case unix.IFLA_LINK_NETNSID:
				dev.PeerNetns = true
			}
		}
		devs = append(devs, dev)
	}
	return devs, nil
}

// xdpProgIDs reads the program id of each XDP mode from a nested IFLA_XDP.
func xdpProgIDs(b []byte) ([]uint32, error) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFLA_XDP_SKB_PROG_ID, unix.IFLA_XDP_DRV_PROG_ID, unix.IFLA_XDP_HW_PROG_ID:
			if len(a.Value) >= 4 {
				ids = append(ids, binary.NativeEndian.Uint32(a.Value))
			}
		}
	}
	return ids, nil
}

// linkKind reads IFLA_INFO_KIND from a nested IFLA_LINKINFO, "" where
// it cannot, and for a netkit device whether it is the primary
// (IFLA_NETKIT_PRIMARY in IFLA_INFO_DATA).
func linkKind(b []byte) (kind string, primary bool) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return "", false
	}
	var data []byte
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFLA_INFO_KIND:
			kind = cString(a.Value)
		case unix.IFLA_INFO_DATA:
			data = a.Value
		}
	}
	if kind != "netkit" || data == nil {
		return kind, false
	}
	if attrs, err = nl.ParseRouteAttr(data); err != nil {
		return kind, false
	}
	for _, a := range attrs {
		if a.Attr.Type == nl.IFLA_NETKIT_PRIMARY && len(a.Value) >= 1 {
			primary = a.Value[0] != 0
		}
	}
	return kind, primary
}

// clsactParents are where a clsact qdisc hangs its ingress and egress
// filters: TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS / TC_H_MIN_EGRESS). The
// older ingress qdisc takes filters at the first only; it has one filter
// block and would list the same filters again as egress ones (bpftool
// does list them so, four times over).
var clsactParents = []struct {
	parent uint32
	dir    string
}{
	{netlink.HANDLE_MIN_INGRESS, "ingress"},
	{netlink.HANDLE_MIN_EGRESS, "egress"},
}

// addTC adds the BPF filters of every clsact or ingress qdisc. One qdisc
// dump finds the devices that have one, so filters are dumped only there:
// the kernel dumps filters one device and parent at a time. Filters of
// classful qdiscs (a bpf classifier under htb) are not read.
func addTC(out map[uint32][]AttachPoint, devs []NetDevice) error {
	qdiscs, err := retryDump(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(nil) })
	if err != nil {
		return fmt.Errorf("list qdiscs: %w", err)
	}
	names := make(map[int]string, len(devs))
	for _, dev := range devs {
		names[dev.Index] = dev.Name
	}
	for _, q := range qdiscs {
		parents := clsactParents
		switch q.Type() {
		case "clsact":
		case "ingress":
			parents = clsactParents[:1]
		default:
			continue
		}
		index := q.Attrs().LinkIndex
		dev := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}
		for _, p := range parents {
			// A device or qdisc gone since the qdisc dump lists no filters.
			filters, err := retryDump(func() ([]netlink.Filter, error) { return netlink.FilterList(dev, p.parent) })
			if err != nil {
				return fmt.Errorf("list %s filters of ifindex %d: %w", p.dir, index, err)
			}
			for _, f := range filters {
				bf, ok := f.(*netlink.BpfFilter)
				if !ok || bf.Id <= 0 {
					continue
				}
				id := uint32(bf.Id)
				out[id] = appendNew(out[id], AttachPoint{Type: "tc", Target: ifaceTarget(index, names[index]) + " " + p.dir})
			}
		}
	}
	return nil
}

// retryDump runs a netlink dump again while the kernel reports that what
// it dumps changed meanwhile, which leaves the result inconsistent.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var err error
	for range dumpTries {
		var res []T
		if res, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return res, err
		}
	}
	return nil, err
}

// MergeAttach appends to links[prog] each attach point of more whose
// type, target and namespace that program does not have yet, so
// attachments reported by both Links and NetAttach or PerfEventAttach are
// listed once. It returns links, made if nil.
func MergeAttach(links, more map[uint32][]AttachPoint) map[uint32][]AttachPoint {
	if links == nil {
		links = make(map[uint32][]AttachPoint, len(more))
	}
	for id, aps := range more {
		for _, ap := range aps {
			links[id] = appendNew(links[id], ap)
		}
	}
	return links
}

// NamePerfLinks names the perf_event links of links whose event the
// kernel did not tell (Target "": link info says nothing of a perf event
// before Linux 6.6) from perf, PerfEventAttach's answer for the same
// programs: where a program has one such link and perf one entry, the
// link takes its target and the entry goes. The rest of perf is returned
// for MergeAttach.
func NamePerfLinks(links, perf map[uint32][]AttachPoint) map[uint32][]AttachPoint {
	rest := make(map[uint32][]AttachPoint, len(perf))
	for id, aps := range perf {
		unnamed := -1
		for i, a := range links[id] {
			if a.Type == "perf_event" && a.Target == "" {
				if unnamed >= 0 {
					unnamed = -2 // more than one: which is which is unknown
					break
				}
				unnamed = i
			}
		}
		if unnamed >= 0 && len(aps) == 1 {
			links[id][unnamed].Target = aps[0].Target
			continue
		}
		rest[id] = aps
	}
	return rest
}

// appendNew appends ap to aps unless an entry has its type, target and
// namespace.
func appendNew(aps []AttachPoint, ap AttachPoint) []AttachPoint {
	for _, a := range aps {
		if a.Type == ap.Type && a.Target == ap.Target && a.Netns == ap.Netns {
			return aps
		}
	}
	return append(aps, ap)
}
