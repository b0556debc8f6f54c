package collectors

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// attached is a link the test made and what Links must say about it.
type attached struct {
	prog   *ebpf.Program
	link   link.Link
	typ    string
	target string // a regexp
}

func linkID(tb testing.TB, l link.Link) uint32 {
	tb.Helper()
	info, err := l.Info()
	if err != nil {
		tb.Fatalf("link info: %v", err)
	}
	return uint32(info.ID)
}

func TestLinks(t *testing.T) {
	privtest.Root(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	var links []attached
	add := func(prog *ebpf.Program, l link.Link, err error, typ, target string) {
		t.Helper()
		if err != nil {
			t.Fatalf("attach %s: %v", typ, err)
		}
		t.Cleanup(func() { l.Close() })
		links = append(links, attached{prog, l, typ, "^" + target + "$"})
	}

	xdp := loadProg(t, ebpf.XDP, ebpf.AttachNone, 2) // XDP_PASS
	l, err := link.AttachXDP(link.XDPOptions{Program: xdp, Interface: lo.Index, Flags: link.XDPGenericMode})
	add(xdp, l, err, "xdp", fmt.Sprintf(`ifindex %d \(lo\)`, lo.Index))

	tcx := loadProg(t, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1) // TCX_NEXT
	l, err = link.AttachTCX(link.TCXOptions{Program: tcx, Interface: lo.Index, Attach: ebpf.AttachTCXIngress})
	add(tcx, l, err, "tcx", fmt.Sprintf(`ifindex %d \(lo\) ingress`, lo.Index))

	rawtp := loadProg(t, ebpf.RawTracepoint, ebpf.AttachNone, 0)
	l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_switch", Program: rawtp})
	add(rawtp, l, err, "raw_tracepoint", "sched_switch")

	perf := loadProg(t, ebpf.PerfEvent, ebpf.AttachPerfEvent, 0)
	l, err = attachCPUClock(t, perf)
	// 6.18 reports cpu-clock under its own hidden PMU type (6), not
	// PERF_TYPE_SOFTWARE.
	add(perf, l, err, "perf_event", fmt.Sprintf(`perf_event type \d+ config %d`, unix.PERF_COUNT_SW_CPU_CLOCK))

	byProg, err := Links()
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	for _, a := range links {
		checkLink(t, byProg, a)
	}

	// A uprobe carries a name at a different offset than raw_tracepoint.
	// Uprobes need CONFIG_UPROBE_EVENTS: a kernel without them skips this
	// case (a failure in CI), after the others were checked.
	t.Run("uprobe", func(t *testing.T) {
		uprobe := loadProg(t, ebpf.Kprobe, ebpf.AttachNone, 0)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		ex, err := link.OpenExecutable(exe)
		if err != nil {
			t.Fatal(err)
		}
		// go test strips symbols, so give the file offset.
		l, err := ex.Uprobe("uprobeTarget", uprobe, &link.UprobeOptions{Address: fileOffset(t, reflect.ValueOf(uprobeTarget).Pointer())})
		if errors.Is(err, ebpf.ErrNotSupported) {
			privtest.Skip(t, fmt.Sprintf("no uprobe link on this kernel: %v", err))
		}
		if err != nil {
			t.Fatalf("attach uprobe: %v", err)
		}
		defer l.Close()
		uprobeTarget() // also keeps the symbol in the binary
		byProg, err := Links()
		if err != nil {
			t.Fatalf("links: %v", err)
		}
		checkLink(t, byProg, attached{uprobe, l, "perf_event", "^uprobe " + regexp.QuoteMeta(exe) + "$"})
	})
}

// checkLink checks what Links says of one link the test made against the
// link's own id and bpftool's view of it.
func checkLink(t *testing.T, byProg map[uint32][]AttachPoint, a attached) {
	t.Helper()
	id, lid := progID(t, a.prog), linkID(t, a.link)
	got := byProg[id]
	if len(got) != 1 || got[0].LinkID != lid || got[0].Type != a.typ || !regexp.MustCompile(a.target).MatchString(got[0].Target) {
		t.Errorf("attach points of program %d = %+v, want link %d type %s target %s", id, got, lid, a.typ, a.target)
	}
	var bt struct {
		Type   any    `json:"type"` // a number for types bpftool 7.1 does not know (tcx)
		ProgID uint32 `json:"prog_id"`
		TPName string `json:"tp_name"`
	}
	bpftool(t, &bt, "link", "show", "id", itoa(lid))
	if bt.ProgID != id || (bt.TPName != "" && "^"+bt.TPName+"$" != a.target) {
		t.Errorf("bpftool says link %d: %+v, want prog %d target %q", lid, bt, id, a.target)
	}
	if name, ok := bt.Type.(string); ok && name != a.typ {
		t.Errorf("bpftool names link %d type %q, we say %q", lid, bt.Type, a.typ)
	}
}

//go:noinline
func uprobeTarget() int { return 1 }

// fileOffset maps an address in this process's text to an offset in its
// executable, using /proc/self/maps.
func fileOffset(t *testing.T, addr uintptr) uint64 {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		var start, end, off uint64
		var perms string
		if _, err := fmt.Sscanf(line, "%x-%x %s %x", &start, &end, &perms, &off); err == nil &&
			uint64(addr) >= start && uint64(addr) < end {
			return uint64(addr) - start + off
		}
	}
	t.Fatalf("address %#x not mapped", addr)
	return 0
}

// attachCPUClock links prog to a cpu-clock perf event on CPU 0.
func attachCPUClock(t *testing.T, prog *ebpf.Program) (link.Link, error) {
	t.Helper()
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Sample: 1_000_000_000,
		Bits:   unix.PerfBitDisabled,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open: %w", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
}

// TestDeviceTarget: device targets read back as written, and a device in
// another network namespace is named by it and its name there.
func TestDeviceTarget(t *testing.T) {
	for _, c := range []struct {
		target      string
		index       int
		name, rest  string
		ok          bool
		netnsTarget string // with Netns "netns blue"
	}{
		{"ifindex 6 (bv1) ingress", 6, "bv1", " ingress", true, "netns blue bv1 ingress"},
		{"ifindex 6 (bv1)", 6, "bv1", "", true, "netns blue bv1"},
		{"ifindex 2 egress", 2, "", " egress", true, "netns blue ifindex 2 egress"},
		{"ifindex 2", 2, "", "", true, "netns blue ifindex 2"},
		{"tracepoint sched_switch", 0, "", "", false, "netns blue tracepoint sched_switch"},
		{"ifindex x", 0, "", "", false, "netns blue ifindex x"},
	} {
		index, name, rest, ok := DeviceTarget(c.target)
		if index != c.index || name != c.name || rest != c.rest || ok != c.ok {
			t.Errorf("DeviceTarget(%q) = %d, %q, %q, %v", c.target, index, name, rest, ok)
		}
		if ok && DeviceTargetOf(index, name, rest) != c.target {
			t.Errorf("DeviceTargetOf(%d, %q, %q) = %q, want %q", index, name, rest, DeviceTargetOf(index, name, rest), c.target)
		}
		ap := AttachPoint{Type: "tcx", Target: c.target}
		if got := ap.NetnsTarget(); got != c.target {
			t.Errorf("NetnsTarget of %q in the daemon's namespace = %q", c.target, got)
		}
		ap.Netns = "netns blue"
		if got := ap.NetnsTarget(); got != c.netnsTarget {
			t.Errorf("NetnsTarget of %q in netns blue = %q, want %q", c.target, got, c.netnsTarget)
		}
	}
	// eth0 in two namespaces is two attach points of one program.
	a := AttachPoint{Type: "tcx", Target: "ifindex 2 (eth0) ingress", Netns: "netns a"}
	b := a
	b.Netns = "netns b"
	if got := MergeAttach(map[uint32][]AttachPoint{1: {a}}, map[uint32][]AttachPoint{1: {a, b}}); len(got[1]) != 2 || a.SameLink(b) {
		t.Errorf("MergeAttach of eth0 in two namespaces = %+v, want both", got[1])
	}
}
