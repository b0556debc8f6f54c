package collectors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AttachPoint is one BPF link that attaches a program.
type AttachPoint struct {
	LinkID uint32 `json:"link_id"`
	Type   string `json:"type"`   // bpftool's link type name, "type_N" if unknown
	Target string `json:"target"` // e.g. "ifindex 1 (lo)", "sched_switch"; "" if the kernel does not tell
	// Netns names the network namespace of a device target that is not
	// the daemon's own ("pod ns-a/web-0", "netns blue", "netns
	// 4026532871"), where the ifindex and name of Target are the
	// device's in that namespace; "" in the daemon's own namespace, and
	// for every other target. collectors/netspace sets it.
	Netns string `json:"netns,omitempty"`
	// NetnsKey names that namespace in identities where Netns would not
	// outlive it: a pod's by its workload, "pod ns-a/Deployment/web",
	// which the pod made again under a new name keeps; "" for Netns.
	NetnsKey string `json:"-"`
	// NetnsPending says Netns is a stand-in ("pod <uid>") while the
	// namespace's pod is being asked for: an identity waits for it.
	NetnsPending bool `json:"-"`
	// Missed is the kernel's count of events a kprobe, kretprobe or
	// kprobe_multi link fired for but never ran the program on (a probe
	// hit inside another probe's handler, no free return-probe instance),
	// nil for other links and before Linux 6.7. The program's recursion
	// misses are counted apart, in its stats.
	Missed *uint64 `json:"missed,omitempty"`
}

// SameLink reports whether a and b are the same link on the same target,
// whatever their missed counts.
func (a AttachPoint) SameLink(b AttachPoint) bool {
	return a.LinkID == b.LinkID && a.Type == b.Type && a.Target == b.Target && a.Netns == b.Netns
}

// NetnsTarget is Target as people read it: in another network namespace
// the device is named by its namespace and name, "pod ns-a/web-0 eth0
// ingress" (its ifindex there would mean another device here); in the
// daemon's own namespace Target as it is, "ifindex 6 (bv1) ingress".
func (a AttachPoint) NetnsTarget() string {
	if a.Netns == "" {
		return a.Target
	}
	index, name, rest, ok := DeviceTarget(a.Target)
	if !ok {
		return a.Netns + " " + a.Target
	}
	dev := name
	if dev == "" {
		dev = "ifindex " + strconv.Itoa(index)
	}
	return a.Netns + " " + dev + rest
}

// linkTypes are bpftool's names for enum bpf_link_type, indexed by value.
var linkTypes = [...]string{
	"unspec", "raw_tracepoint", "tracing", "cgroup", "iter",
	"netns", "xdp", "perf_event", "kprobe_multi", "struct_ops",
	"netfilter", "tcx", "uprobe_multi", "netkit", "sockmap",
}

// LinkTypeName returns bpftool's name for a kernel bpf_link_type.
func LinkTypeName(t uint32) string {
	if int(t) < len(linkTypes) {
		return linkTypes[t]
	}
	return "type_" + strconv.FormatUint(uint64(t), 10)
}

// Kernel enum values used to describe targets (include/uapi/linux/bpf.h).
const (
	linkRawTracepoint = 1
	linkTracing       = 2
	linkCgroup        = 3
	linkIter          = 4
	linkNetns         = 5
	linkXDP           = 6
	linkPerfEvent     = 7
	linkKprobeMulti   = 8
	linkStructOps     = 9
	linkNetfilter     = 10
	linkTCX           = 11
	linkUprobeMulti   = 12
	linkNetkit        = 13
	linkSockmap       = 14

	perfEventUprobe     = 1
	perfEventURetprobe  = 2
	perfEventKprobe     = 3
	perfEventKRetprobe  = 4
	perfEventTracepoint = 5
	perfEventEvent      = 6
)

// linkInfo is struct bpf_link_info read without buffers: a 16-byte header
// and a 48-byte union decoded per type.
type linkInfo struct {
	typ    uint32 // 0
	id     uint32 // 4
	progID uint32 // 8
	_      uint32
	union  [48]byte // 16
}

// linkInfoName is bpf_link_info with a name buffer at union offset off:
// 0 for raw_tracepoint and iter, 8 for perf_event (after its type word).
type linkInfoName struct {
	hdr     [4]uint32
	pre     uint64 // union+0 when the pointer sits at union+8
	name    unsafe.Pointer
	nameLen uint32
	_       uint32
	_       [3]uint64
}

type linkInfoName0 struct {
	hdr     [4]uint32
	name    unsafe.Pointer // union+0
	nameLen uint32
	_       uint32
	_       [4]uint64
}

// Links walks all BPF links by id, reads each link's info, closes it, and
// returns attach points by program id. Links that vanish mid-walk are
// skipped. A link that cannot be read is left out and the walk goes on:
// the error names the first such link, beside every other link's attach
// point. Requires CAP_SYS_ADMIN and Linux 5.8.
func Links() (map[uint32][]AttachPoint, error) {
	out := make(map[uint32][]AttachPoint)
	seen := map[uint32]bool{}
	var unread error
	for id := uint32(0); ; {
		next, ok, err := nextID(unix.BPF_LINK_GET_NEXT_ID, id)
		if err != nil || !ok {
			if err == nil {
				pruneTracingTargets(seen)
				err = unread
			}
			return out, err
		}
		id = next
		seen[id] = true
		info, target, err := readLink(id)
		// A link being set up (its id given out, its attach not done)
		// answers EAGAIN (seen on 6.1 while vfsstat attached its fentry
		// programs, the trampoline patched under TCG, for over 50 ms):
		// it is left out of this walk, which goes on, and the error
		// tells the caller to read again soon.
		if errors.Is(err, ErrGone) {
			continue
		}
		if err != nil {
			if unread == nil {
				unread = fmt.Errorf("link %d: %w", id, err)
			}
			continue
		}
		out[info.progID] = append(out[info.progID], AttachPoint{
			LinkID: info.id,
			Type:   LinkTypeName(info.typ),
			Target: target,
			Missed: linkMissed(&info),
		})
	}
}

func readLink(id uint32) (linkInfo, string, error) {
	fd, err := fdByID(unix.BPF_LINK_GET_FD_BY_ID, id)
	if err != nil {
		return linkInfo{}, "", err
	}
	var info linkInfo
	if err := objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info))); err != nil {
		closeFD(fd)
		return linkInfo{}, "", err
	}
	if info.typ == linkTracing {
		// Named from the link's info alone, after its fd is closed: naming
		// it opens its program, and brief holds never nest
		// (internal/transientfd). A second hold taken inside the first
		// waits behind a scan that waits for the first: the daemon's
		// sweep hung so on every kernel where its own fentry program on
		// perf_event_bpf_event made a tracing link (CI, 2026-11-28).
		closeFD(fd)
		return info, tracingLinkTarget(&info), nil
	}
	defer closeFD(fd)
	target, err := linkTarget(fd, &info)
	return info, target, err
}

// tracingLinkTarget names a tracing link's target from its info: its
// attach type, then the object and type ids of what it attaches to.
func tracingLinkTarget(info *linkInfo) string {
	u := info.union[:]
	ne := binary.NativeEndian
	return tracingTarget(info.id, info.progID, ne.Uint32(u), ne.Uint32(u[4:]), ne.Uint32(u[8:]))
}

// linkTarget describes where the link attaches, reading a name from the
// kernel for the types that carry one.
func linkTarget(fd int, info *linkInfo) (string, error) {
	u := info.union[:]
	u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(u[off:]) }
	u64 := func(off int) uint64 { return binary.NativeEndian.Uint64(u[off:]) }
	switch info.typ {
	case linkRawTracepoint, linkIter:
		return linkName(fd, 0)
	case linkCgroup:
		return fmt.Sprintf("cgroup %d", u64(0)), nil
	case linkNetns:
		return fmt.Sprintf("netns %d", u32(0)), nil
	case linkXDP:
		return ifaceName(u32(0)), nil
	case linkTCX:
		dir := map[uint32]string{unix.BPF_TCX_INGRESS: " ingress", unix.BPF_TCX_EGRESS: " egress"}[u32(4)]
		return ifaceName(u32(0)) + dir, nil
	case linkNetkit:
		dir := map[uint32]string{54: " primary", 55: " peer"}[u32(4)] // BPF_NETKIT_PRIMARY, BPF_NETKIT_PEER
		return ifaceName(u32(0)) + dir, nil
	case linkPerfEvent:
		return perfEventTarget(fd, u32(0), u64(8), u32(16))
	case linkKprobeMulti:
		return fmt.Sprintf("%d kprobes", u32(8)), nil
	case linkUprobeMulti:
		return fmt.Sprintf("%d uprobes", u32(36)), nil
	case linkStructOps, linkSockmap:
		return fmt.Sprintf("map %d", u32(0)), nil
	case linkNetfilter:
		return fmt.Sprintf("pf %d hook %d prio %d", u32(0), u32(4), int32(u32(8))), nil
	}
	return "", nil
}

// kernelHasMissed says whether link info carries kprobe missed counts:
// Linux 6.7 added them; before, the same bytes are zero.
var kernelHasMissed = sync.OnceValue(func() bool {
	atLeast, _ := kernelAtLeast(6, 7)
	return atLeast
})

// linkMissed reads the missed count of a kprobe link: union offset 16 for
// kprobe_multi (after addrs, count, flags), 32 for a perf_event kprobe or
// kretprobe (after its type word, func_name, name_len, offset, addr).
func linkMissed(info *linkInfo) *uint64 {
	if !kernelHasMissed() {
		return nil
	}
	u := info.union[:]
	var off int
	switch {
	case info.typ == linkKprobeMulti:
		off = 16
	case info.typ == linkPerfEvent && (binary.NativeEndian.Uint32(u) == perfEventKprobe || binary.NativeEndian.Uint32(u) == perfEventKRetprobe):
		off = 32
	default:
		return nil
	}
	n := binary.NativeEndian.Uint64(u[off:])
	return &n
}

func perfEventTarget(fd int, typ uint32, config uint64, eventType uint32) (string, error) {
	kind := map[uint32]string{
		perfEventUprobe: "uprobe", perfEventURetprobe: "uretprobe",
		perfEventKprobe: "kprobe", perfEventKRetprobe: "kretprobe",
		perfEventTracepoint: "tracepoint",
	}[typ]
	if typ == perfEventEvent {
		return fmt.Sprintf("perf_event type %d config %d", eventType, config), nil
	}
	if kind == "" {
		return "", nil
	}
	name, err := linkName(fd, 8)
	if err != nil || name == "" {
		return kind, err
	}
	return kind + " " + name, nil
}

// linkName asks the kernel for the name a link carries (tracepoint,
// function, file or iterator target), whose buffer pointer sits at union
// offset off.
func linkName(fd int, off int) (string, error) {
	buf := make([]byte, 512)
	var err error
	if off == 0 {
		info := linkInfoName0{name: unsafe.Pointer(&buf[0]), nameLen: uint32(len(buf))}
		err = objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info)))
	} else {
		info := linkInfoName{name: unsafe.Pointer(&buf[0]), nameLen: uint32(len(buf))}
		err = objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info)))
	}
	if errors.Is(err, unix.ENOSPC) {
		err = nil // truncated to the buffer, still NUL-terminated
	}
	return cString(buf), err
}

func ifaceName(ifindex uint32) string {
	if iface, err := net.InterfaceByIndex(int(ifindex)); err == nil {
		return ifaceTarget(int(ifindex), iface.Name)
	}
	return ifaceTarget(int(ifindex), "")
}

// ifaceTarget names a device as an attach point's target: "ifindex 6
// (bv1)", or "ifindex 6" without a name.
func ifaceTarget(ifindex int, name string) string {
	if name == "" {
		return fmt.Sprintf("ifindex %d", ifindex)
	}
	return fmt.Sprintf("ifindex %d (%s)", ifindex, name)
}

// DeviceTarget reads a device target as ifaceTarget and the callers that
// add a direction write it: "ifindex 6 (bv1) ingress" is 6, "bv1" and "
// ingress"; "ifindex 6" is 6, "" and "". ok is false for a target that
// names no device.
func DeviceTarget(target string) (ifindex int, name, rest string, ok bool) {
	m := deviceTarget.FindStringSubmatch(target)
	if m == nil {
		return 0, "", "", false
	}
	ifindex, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, "", "", false
	}
	return ifindex, m[2], m[3], true
}

// DeviceTargetOf is the target of a device attachment, as Links and
// NetAttach write it: "ifindex 6 (bv1)" and the rest (" ingress").
func DeviceTargetOf(ifindex int, name, rest string) string {
	return ifaceTarget(ifindex, name) + rest
}

var deviceTarget = regexp.MustCompile(`^ifindex (\d+)(?: \(([^)]*)\))?(.*)$`)
