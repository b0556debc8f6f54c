// Package netspace finds the network namespace of each device a BPF
// program is attached to, and names it.
//
// A tcx, XDP or netkit link's info (and its fdinfo, Linux 6.18 too) gives
// the device's ifindex only, a number that is the device's within its own
// namespace: a pod's eth0 is ifindex 2 in the pod, and ifindex 2 on the
// host is another device. The kernel says nothing else of where the link
// is. So, as bpftool net does per namespace, the scan enters each
// network namespace of the host in turn (setns(2) on a locked thread),
// lists its devices and what netlink attaches to them (TC filters, XDP),
// and asks each device whose ifindex a link names for its tcx and netkit
// links (BPF_PROG_QUERY, which reads the ifindex in the caller's
// namespace): a link is where its id is listed. Only the netns link type
// carries a namespace inode of its own.
//
// A netkit peer link is the exception: the kernel puts it on the peer
// device (its info gives the peer's ifindex, in the peer's namespace,
// usually a pod's) but lists it only on the primary, usually on the host,
// and in the daemon's namespace the peer's ifindex may well be the
// primary's own. So every netkit primary is asked for its peer's links,
// and a peer link is placed on the peer: in the primary's namespace where
// the pair is in one, else in the namespace of the netkit device that
// has the link's ifindex and names the primary's ifindex as its peer.
package netspace

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
)

// Unknown is the namespace of a device link that is not in the daemon's
// namespace nor in any the scan could enter: one kept only by an open
// file or a bind mount in another mount namespace, or one the daemon may
// not enter. Its target keeps the ifindex and drops the name, which would
// be another device's.
const Unknown = "netns unknown"

// Config says where the scan looks.
type Config struct {
	// ProcRoot is where processes are listed, usually /proc.
	ProcRoot string
	// Label, if set, names namespaces first (pod metadata, issue 43).
	Label Label
}

// Scanner places device attachments in their network namespaces. One
// caller at a time: the sampler's owners scan, under its lock.
type Scanner struct {
	cfg  Config
	self uint64
	last Scan
}

// Scan is what the last Attach looked at, and what it cost.
type Scan struct {
	Namespaces int           // network namespaces entered besides the daemon's own
	Took       time.Duration // the whole Attach, own namespace included
}

// New makes a scanner for the namespaces under cfg.ProcRoot, the daemon's
// own read now.
func New(cfg Config) (*Scanner, error) {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	self, err := selfInode(cfg.ProcRoot)
	if err != nil {
		return nil, err
	}
	return &Scanner{cfg: cfg, self: self}, nil
}

// Last is what the last Attach looked at.
func (s *Scanner) Last() Scan { return s.last }

// deviceLink is a tcx, XDP or netkit link among Links' attach points,
// named by ifindex in the daemon's namespace until it is placed.
type deviceLink struct {
	prog    uint32
	at      int // index in links[prog]
	linkID  uint32
	typ     string
	ifindex int
	rest    string // the direction, " ingress"
	attach  ebpf.AttachType
}

// Attach returns links (collectors.Links, by program id) with each tcx,
// XDP and netkit link placed in the network namespace of its device, and
// the programs netlink attaches in every namespace (collectors.NetAttach)
// merged in. A device in the daemon's own namespace reads as before:
// "ifindex 6 (bv1) ingress"; one in another namespace is named as it is
// there, with Netns set to the namespace's label. Other namespaces are
// entered only when others is true (the caller has a network program
// loaded) or a device link is not in the daemon's own. An error says
// what was not read; the result holds everything else.
func (s *Scanner) Attach(links map[uint32][]collectors.AttachPoint, others bool) (map[uint32][]collectors.AttachPoint, error) {
	start := time.Now()
	s.last = Scan{}
	pending := deviceLinks(links)
	var errs []error

	// Peer links that netkit primaries list whose peers are in another
	// namespace, from every namespace read: where the peer is, is known
	// only once the namespace it is in is read too.
	remote := map[uint32]netkitPeer{}
	own := look(pending, remote)
	if own.err != nil {
		// Without the own namespace's view no link can be told to be
		// elsewhere: they keep Links' names, as before this package.
		errs = append(errs, own.err)
		pending = nil
	} else {
		pending = place(links, pending, own, Name{})
		links = collectors.MergeAttach(links, own.net)
	}

	if others || len(pending) > 0 {
		nss, err := list(s.cfg.ProcRoot)
		if err != nil {
			errs = append(errs, fmt.Errorf("list network namespaces: %w", err))
		}
		nss = slices.DeleteFunc(nss, func(ns Namespace) bool { return ns.Inode == s.self })
		var views []foreign
		if err := inEach(s.cfg.ProcRoot, nss, func(ns Namespace) {
			views = append(views, foreign{ns, look(pending, remote)})
		}); err != nil {
			errs = append(errs, err)
		}
		s.last.Namespaces = len(views)
		var unread []error
		for _, v := range views {
			if v.err != nil {
				unread = append(unread, fmt.Errorf("network namespace %d: %w", v.ns.Inode, v.err))
				continue
			}
			var name Name
			if len(v.net) > 0 || found(pending, v.view) {
				name = s.label(v.ns)
			}
			pending = place(links, pending, v.view, name)
			for _, aps := range v.net {
				for i := range aps {
					name.set(&aps[i])
				}
			}
			links = collectors.MergeAttach(links, v.net)
		}
		if len(unread) > 0 {
			errs = append(errs, fmt.Errorf("%d network namespaces not read, the first: %w", len(unread), unread[0]))
		}
		if own.err == nil {
			// A netkit peer here whose primary is in a namespace read
			// after this one: Links' name is right.
			pending = place(links, pending, own, Name{})
		}
	}
	// Not in the daemon's namespace, whose view said so, nor in any other
	// it read: its name there would be another device's.
	for _, d := range pending {
		ap := &links[d.prog][d.at]
		ap.Target, ap.Netns = collectors.DeviceTargetOf(d.ifindex, "", d.rest), Unknown
	}
	s.last.Took = time.Since(start)
	return links, errors.Join(errs...)
}

type foreign struct {
	ns Namespace
	view
}

// deviceLinks are the device links among links.
func deviceLinks(links map[uint32][]collectors.AttachPoint) []deviceLink {
	var out []deviceLink
	for prog, aps := range links {
		for i, ap := range aps {
			if ap.LinkID == 0 || ap.Netns != "" {
				continue
			}
			ifindex, _, rest, ok := collectors.DeviceTarget(ap.Target)
			if !ok {
				continue
			}
			d := deviceLink{prog: prog, at: i, linkID: ap.LinkID, typ: ap.Type, ifindex: ifindex, rest: rest}
			switch {
			case ap.Type == "tcx" && rest == " ingress":
				d.attach = ebpf.AttachTCXIngress
			case ap.Type == "tcx" && rest == " egress":
				d.attach = ebpf.AttachTCXEgress
			case ap.Type == "netkit" && rest == " primary":
				d.attach = ebpf.AttachNetkitPrimary
			case ap.Type == "netkit" && rest == " peer":
				d.attach = ebpf.AttachNetkitPeer
			case ap.Type == "xdp":
			default:
				continue
			}
			out = append(out, d)
		}
	}
	return out
}

// view is what one namespace shows: its devices, what netlink attaches
// there, and the links of the devices pending links name, by link id.
type view struct {
	devs  map[int]collectors.NetDevice
	net   map[uint32][]collectors.AttachPoint
	links map[uint32]int // link id → ifindex
	// peers are the peer links of the netkit primaries here; remote,
	// shared by all views, those of primaries in any namespace whose
	// peers are in another.
	peers, remote map[uint32]netkitPeer
	err           error
}

// netkitPeer is a netkit peer link as its primary's query tells it.
type netkitPeer struct {
	primary   int  // the primary's ifindex, in its namespace
	peer      int  // the peer's ifindex, the link's device, in its namespace
	elsewhere bool // the peer is not in the primary's namespace
}

// netkitPeerLink says whether d is a netkit peer link.
func netkitPeerLink(d deviceLink) bool {
	return d.typ == "netkit" && d.attach == ebpf.AttachNetkitPeer
}

// look reads the calling thread's namespace: one device dump (with XDP),
// the TC filters, a BPF_PROG_QUERY for each tcx or netkit primary hook
// that a pending link names and a device here has, and, while a netkit
// peer link is pending, one for the peer hook of each netkit primary
// here (adding those whose peers are elsewhere to remote).
func look(pending []deviceLink, remote map[uint32]netkitPeer) view {
	devs, net, err := collectors.NetView()
	if err != nil {
		return view{err: err}
	}
	v := view{devs: make(map[int]collectors.NetDevice, len(devs)), net: net, links: map[uint32]int{},
		peers: map[uint32]netkitPeer{}, remote: remote}
	for _, d := range devs {
		v.devs[d.Index] = d
	}
	type hook struct {
		ifindex int
		attach  ebpf.AttachType
	}
	asked := map[hook]bool{}
	for _, d := range pending {
		if netkitPeerLink(d) {
			continue // asked of the primaries below
		}
		h := hook{d.ifindex, d.attach}
		dev, ok := v.devs[d.ifindex]
		if d.typ == "xdp" || asked[h] || !ok || (d.typ == "netkit" && dev.Kind != "netkit") {
			continue
		}
		asked[h] = true
		for _, id := range linksOn(d.ifindex, d.attach) {
			v.links[id] = d.ifindex
		}
	}
	if !slices.ContainsFunc(pending, netkitPeerLink) {
		return v
	}
	for _, dev := range devs {
		if dev.Kind != "netkit" || !dev.Primary {
			continue
		}
		nk := netkitPeer{primary: dev.Index, peer: dev.Peer, elsewhere: dev.PeerNetns}
		for _, id := range linksOn(dev.Index, ebpf.AttachNetkitPeer) {
			v.peers[id] = nk
			if nk.elsewhere {
				remote[id] = nk
			}
		}
	}
	return v
}

// linksOn are the ids of the links on the hook attach of the device of
// ifindex in the calling thread's namespace; none where the device went
// since the dump.
func linksOn(ifindex int, attach ebpf.AttachType) []uint32 {
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: attach})
	if err != nil {
		return nil
	}
	var ids []uint32
	for _, p := range res.Programs {
		if id, ok := p.LinkID(); ok {
			ids = append(ids, uint32(id))
		}
	}
	return ids
}

// has says whether the link d is on a device of v: a tcx or netkit
// primary link by its id, an XDP link by its program on the device of its
// ifindex (netlink tells programs, not links; the same program on the
// same ifindex in two namespaces is placed in the first looked at, the
// daemon's own), a netkit peer link on the netkit peer of its ifindex
// whose primary lists it (where the primary is in another namespace, the
// peer that names the primary's ifindex: two pairs of the same two
// ifindexes, each across namespaces, would be told apart by the netns ids
// of each end, which this does not read).
func (v view) has(d deviceLink) bool {
	if d.typ == "xdp" {
		return slices.Contains(v.devs[d.ifindex].XDPProgs(), d.prog)
	}
	if netkitPeerLink(d) {
		dev, ok := v.devs[d.ifindex]
		if !ok || dev.Kind != "netkit" || dev.Primary {
			return false
		}
		nk, ok := v.peers[d.linkID]
		if !ok || nk.elsewhere {
			nk, ok = v.remote[d.linkID]
		}
		return ok && nk.peer == d.ifindex && nk.primary == dev.Peer && nk.elsewhere == dev.PeerNetns
	}
	ifindex, ok := v.links[d.linkID]
	return ok && ifindex == d.ifindex
}

// found says whether any pending link is in v.
func found(pending []deviceLink, v view) bool {
	return slices.ContainsFunc(pending, v.has)
}

// place names each pending link found in v by its device there, with
// netns as its namespace (none for the daemon's own, whose names Links
// already gave), and returns the links still pending.
func place(links map[uint32][]collectors.AttachPoint, pending []deviceLink, v view, netns Name) []deviceLink {
	return slices.DeleteFunc(pending, func(d deviceLink) bool {
		if !v.has(d) {
			return false
		}
		if netns.Label != "" {
			ap := &links[d.prog][d.at]
			ap.Target = collectors.DeviceTargetOf(d.ifindex, v.devs[d.ifindex].Name, d.rest)
			netns.set(ap)
		}
		return true
	})
}

// set puts n on ap, a device's attach point in n's namespace.
func (n Name) set(ap *collectors.AttachPoint) {
	ap.Netns, ap.NetnsKey, ap.NetnsPending = n.Label, n.Key, n.Pending
}
