package collectors

import (
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestMergeAttach(t *testing.T) {
	missed := uint64(3)
	links := map[uint32][]AttachPoint{
		1: {{LinkID: 7, Type: "xdp", Target: "ifindex 2 (a)"}},
		2: {{LinkID: 8, Type: "perf_event", Target: "kprobe f", Missed: &missed}},
	}
	more := map[uint32][]AttachPoint{
		1: {{Type: "xdp", Target: "ifindex 2 (a)"}, {Type: "xdp", Target: "ifindex 3 (b)"}},
		2: {{Type: "perf_event", Target: "kprobe f"}, {Type: "perf_event", Target: "kprobe f"}},
		3: {{Type: "tc", Target: "ifindex 2 (a) ingress"}, {Type: "tc", Target: "ifindex 2 (a) egress"}},
	}
	want := map[uint32][]AttachPoint{
		1: {{LinkID: 7, Type: "xdp", Target: "ifindex 2 (a)"}, {Type: "xdp", Target: "ifindex 3 (b)"}},
		2: {{LinkID: 8, Type: "perf_event", Target: "kprobe f", Missed: &missed}},
		3: {{Type: "tc", Target: "ifindex 2 (a) ingress"}, {Type: "tc", Target: "ifindex 2 (a) egress"}},
	}
	if got := MergeAttach(links, more); !reflect.DeepEqual(got, want) {
		t.Errorf("MergeAttach = %+v, want %+v", got, want)
	}
	if got := MergeAttach(nil, map[uint32][]AttachPoint{3: want[3]}); !reflect.DeepEqual(got, map[uint32][]AttachPoint{3: want[3]}) {
		t.Errorf("MergeAttach(nil, ...) = %+v", got)
	}
}

// TestNamePerfLinks: a perf_event link the kernel named nothing of (6.1)
// takes its holder's perf event's target; one already named, two unnamed
// links of one program, or a program with no such link keep theirs, and
// their holders' entries are left for MergeAttach.
func TestNamePerfLinks(t *testing.T) {
	links := map[uint32][]AttachPoint{
		1: {{LinkID: 7, Type: "perf_event"}},
		2: {{LinkID: 8, Type: "perf_event", Target: "kprobe f"}},
		3: {{LinkID: 9, Type: "perf_event"}, {LinkID: 10, Type: "perf_event"}},
	}
	perf := map[uint32][]AttachPoint{
		1: {{Type: "perf_event", Target: "kretprobe f"}},
		2: {{Type: "perf_event", Target: "kprobe f"}},
		3: {{Type: "perf_event", Target: "uprobe /a"}, {Type: "perf_event", Target: "uretprobe /a"}},
		4: {{Type: "perf_event", Target: "tracepoint sys_enter_getppid"}},
	}
	rest := NamePerfLinks(links, perf)
	if want := []AttachPoint{{LinkID: 7, Type: "perf_event", Target: "kretprobe f"}}; !reflect.DeepEqual(links[1], want) {
		t.Errorf("program 1: %+v, want %+v", links[1], want)
	}
	if links[2][0].Target != "kprobe f" || links[3][0].Target != "" || links[3][1].Target != "" {
		t.Errorf("links named that should not be: %+v", links)
	}
	if want := map[uint32][]AttachPoint{2: perf[2], 3: perf[3], 4: perf[4]}; !reflect.DeepEqual(rest, want) {
		t.Errorf("rest = %+v, want %+v", rest, want)
	}
}

// addTCFilter attaches prog as a direct-action BPF filter of dev's clsact
// qdisc at parent (ingress or egress), the way `tc filter add ... bpf da`
// does. It returns a function that detaches it.
func addTCFilter(t *testing.T, dev netlink.Link, parent uint32, prog *ebpf.Program) func() {
	t.Helper()
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: dev.Attrs().Index, Parent: parent, Handle: 1,
			Protocol: unix.ETH_P_ALL, Priority: 1,
		},
		Fd: prog.FD(), Name: "bpfperf_test", DirectAction: true,
	}
	if err := netlink.FilterAdd(f); err != nil {
		t.Fatalf("add tc filter to %s: %v", dev.Attrs().Name, err)
	}
	del := func() { netlink.FilterDel(f) }
	t.Cleanup(del)
	return del
}

// bpftoolNetAttach is what bpftool net says is attached to devs, as
// attach points. It lists XDP programs attached through a link too.
func bpftoolNetAttach(t *testing.T, devs map[int]string) map[uint32][]AttachPoint {
	t.Helper()
	out := make(map[uint32][]AttachPoint)
	for _, a := range privtest.BpftoolNet(t, "") {
		if devs[a.Ifindex] != a.Devname {
			continue
		}
		switch dir, ok := strings.CutPrefix(a.Dir, "clsact/"); {
		case a.Kind == "xdp":
			out[a.ID] = append(out[a.ID], AttachPoint{Type: "xdp", Target: fmt.Sprintf("ifindex %d (%s)", a.Ifindex, a.Devname)})
		case ok:
			out[a.ID] = append(out[a.ID], AttachPoint{Type: "tc", Target: fmt.Sprintf("ifindex %d (%s) %s", a.Ifindex, a.Devname, dir)})
		}
	}
	return sortedAttach(out)
}

// onDevs keeps the attach points whose target is one of devs.
func onDevs(byProg map[uint32][]AttachPoint, devs map[int]string) map[uint32][]AttachPoint {
	out := make(map[uint32][]AttachPoint)
	for id, aps := range byProg {
		for _, ap := range aps {
			for index, name := range devs {
				prefix := fmt.Sprintf("ifindex %d (%s)", index, name)
				if ap.Target == prefix || strings.HasPrefix(ap.Target, prefix+" ") {
					out[id] = append(out[id], ap)
				}
			}
		}
	}
	return sortedAttach(out)
}

func sortedAttach(byProg map[uint32][]AttachPoint) map[uint32][]AttachPoint {
	for _, aps := range byProg {
		slices.SortFunc(aps, func(a, b AttachPoint) int {
			return strings.Compare(a.Type+" "+a.Target, b.Type+" "+b.Target)
		})
	}
	return byProg
}

// TestNetAttach attaches TC filters (ingress and egress) and XDP through
// netlink, and a tcx link and an XDP link beside them, on veths whose
// peers sit in another namespace. NetAttach lists exactly what bpftool net
// lists for those devices, the XDP link included; merged with Links each
// attachment appears once (the XDP link's with its link id); detached,
// they are gone.
func TestNetAttach(t *testing.T) {
	privtest.Root(t)
	for _, tool := range []string{"ip", "bpftool"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, tool+" is not installed")
		}
	}
	hosts := privtest.VethsInNetns(t, 3)
	devs := make(map[int]string)
	target := make([]string, len(hosts))
	for i, h := range hosts {
		devs[h.Attrs().Index] = h.Attrs().Name
		target[i] = fmt.Sprintf("ifindex %d (%s)", h.Attrs().Index, h.Attrs().Name)
	}

	tc := loadProg(t, ebpf.SchedCLS, ebpf.AttachNone, 0)         // TC_ACT_OK
	xdp := loadProg(t, ebpf.XDP, ebpf.AttachNone, 2)             // XDP_PASS
	tcx := loadProg(t, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1) // TCX_NEXT
	tcID, xdpID, tcxID := progID(t, tc), progID(t, xdp), progID(t, tcx)

	var detach []func()
	for _, h := range hosts {
		privtest.AddClsact(t, h)
		detach = append(detach, addTCFilter(t, h, netlink.HANDLE_MIN_INGRESS, tc))
	}
	detach = append(detach, addTCFilter(t, hosts[0], netlink.HANDLE_MIN_EGRESS, tc))

	if err := netlink.LinkSetXdpFd(hosts[0], xdp.FD()); err != nil {
		t.Fatalf("attach xdp to %s: %v", hosts[0].Attrs().Name, err)
	}
	xdpOff := func() { netlink.LinkSetXdpFd(hosts[0], -1) }
	t.Cleanup(xdpOff)
	detach = append(detach, xdpOff)

	tcxLink, err := link.AttachTCX(link.TCXOptions{Program: tcx, Interface: hosts[1].Attrs().Index, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		t.Fatalf("attach tcx: %v", err)
	}
	t.Cleanup(func() { tcxLink.Close() })
	// The same XDP program through a link on another device: netlink
	// reports it as bpftool net does; merged with Links it is listed once.
	xdpLink, err := link.AttachXDP(link.XDPOptions{Program: xdp, Interface: hosts[2].Attrs().Index})
	if err != nil {
		t.Fatalf("attach xdp link: %v", err)
	}
	t.Cleanup(func() { xdpLink.Close() })
	detach = append(detach, func() { tcxLink.Close() }, func() { xdpLink.Close() })

	byProg, err := NetAttach()
	if err != nil {
		t.Fatalf("NetAttach: %v", err)
	}
	got := onDevs(byProg, devs)
	want := sortedAttach(map[uint32][]AttachPoint{
		tcID: {
			{Type: "tc", Target: target[0] + " egress"},
			{Type: "tc", Target: target[0] + " ingress"},
			{Type: "tc", Target: target[1] + " ingress"},
			{Type: "tc", Target: target[2] + " ingress"},
		},
		xdpID: {{Type: "xdp", Target: target[0]}, {Type: "xdp", Target: target[2]}},
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NetAttach on the test's devices = %+v, want %+v", got, want)
	}

	if bt := bpftoolNetAttach(t, devs); !reflect.DeepEqual(got, bt) {
		t.Errorf("NetAttach on the test's devices = %+v, bpftool net says %+v", got, bt)
	}

	links, err := Links()
	if err != nil {
		t.Fatalf("Links: %v", err)
	}
	merged := MergeAttach(links, byProg)
	if aps := merged[tcxID]; len(aps) != 1 || aps[0].Type != "tcx" || aps[0].LinkID == 0 || aps[0].Target != target[1]+" ingress" {
		t.Errorf("merged attach points of the tcx program = %+v, want its one tcx link on %s ingress", aps, target[1])
	}
	aps := merged[xdpID]
	if len(aps) != 2 || !slices.ContainsFunc(aps, func(ap AttachPoint) bool { return ap.LinkID != 0 && ap.Target == target[2] }) ||
		!slices.ContainsFunc(aps, func(ap AttachPoint) bool { return ap.LinkID == 0 && ap.Target == target[0] }) {
		t.Errorf("merged attach points of the xdp program = %+v, want its link on %s and netlink on %s", aps, target[2], target[0])
	}
	if len(merged[tcID]) != 4 {
		t.Errorf("merged attach points of the tc program = %+v, want the 4 filters", merged[tcID])
	}

	for _, f := range detach {
		f()
	}
	byProg, err = NetAttach()
	if err != nil {
		t.Fatalf("NetAttach after detaching: %v", err)
	}
	if got := onDevs(byProg, devs); len(got) != 0 {
		t.Errorf("NetAttach after detaching = %+v, want nothing on the test's devices", got)
	}
	if bt := bpftoolNetAttach(t, devs); len(bt) != 0 {
		t.Errorf("bpftool net after detaching = %+v, want nothing on the test's devices", bt)
	}
}

// TestNetAttachIngressQdisc: a filter under the older ingress qdisc (no
// clsact) is one ingress attachment. bpftool net lists it four times
// (kinds ingress, root, clsact/ingress, clsact/egress): the ingress qdisc
// has one filter block whatever parent a dump asks for.
func TestNetAttachIngressQdisc(t *testing.T) {
	privtest.Root(t)
	if _, err := exec.LookPath("ip"); err != nil {
		privtest.Skip(t, "ip is not installed")
	}
	dev := privtest.VethsInNetns(t, 1)[0]
	q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
	if err := netlink.QdiscAdd(q); err != nil {
		t.Fatalf("add ingress qdisc: %v", err)
	}
	t.Cleanup(func() { netlink.QdiscDel(q) })
	tc := loadProg(t, ebpf.SchedCLS, ebpf.AttachNone, 0)
	addTCFilter(t, dev, netlink.HANDLE_MIN_INGRESS, tc)

	byProg, err := NetAttach()
	if err != nil {
		t.Fatalf("NetAttach: %v", err)
	}
	want := []AttachPoint{{Type: "tc", Target: fmt.Sprintf("ifindex %d (%s) ingress", dev.Attrs().Index, dev.Attrs().Name)}}
	if got := byProg[progID(t, tc)]; !reflect.DeepEqual(got, want) {
		t.Errorf("NetAttach for a filter of an ingress qdisc = %+v, want %+v", got, want)
	}
}
