package netspace_test

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/netspace"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// load loads `r0 = ret; exit` of typ, closed when tb ends, and its id.
func load(tb testing.TB, typ ebpf.ProgramType, attach ebpf.AttachType, ret int32) (*ebpf.Program, uint32) {
	tb.Helper()
	return privtest.LoadReturn(tb, typ, attach, ret)
}

// needTools skips where ip or bpftool is missing.
func needTools(tb testing.TB) {
	tb.Helper()
	privtest.Root(tb)
	for _, tool := range []string{"ip", "bpftool"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(tb, tool+" is not installed")
		}
	}
}

// attachNow is Attach with label on links (Links' now if nil), as the
// daemon's owners scan does it while a network program is loaded.
func attachNow(tb testing.TB, links map[uint32][]collectors.AttachPoint, label netspace.Label) (*netspace.Scanner, map[uint32][]collectors.AttachPoint) {
	tb.Helper()
	var err error
	if links == nil {
		if links, err = collectors.Links(); err != nil {
			tb.Fatal(err)
		}
	}
	sc, err := netspace.New(netspace.Config{Label: label})
	if err != nil {
		tb.Fatal(err)
	}
	got, err := sc.Attach(links, true)
	if err != nil {
		tb.Fatalf("Attach: %v", err)
	}
	return sc, got
}

// TestAttachInPodNetns: a tcx link, an XDP link and a TC filter on eth0
// inside a namespace, whose ifindex is the host end's out here, are named
// by the namespace and eth0; the host end's own tcx link stays as before.
// The oracle is bpftool net run inside the namespace.
func TestAttachInPodNetns(t *testing.T) {
	needTools(t)
	s := privtest.ProgramsInPodNetns(t)
	links, err := collectors.Links()
	if err != nil {
		t.Fatal(err)
	}
	hostName := s.NS.Host.Attrs().Name
	// The clash the test is made for: by ifindex alone, eth0 is the host end.
	if got, want := links[s.TCX], []collectors.AttachPoint{{LinkID: s.TCXLink, Type: "tcx", Target: fmt.Sprintf("ifindex %d (%s) ingress", s.NS.Index, hostName)}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Links for the tcx link in %s = %+v, want %+v", s.NS.Name, got, want)
	}

	sc, got := attachNow(t, links, nil)
	netns := "netns " + s.NS.Name
	eth0 := fmt.Sprintf("ifindex %d (eth0)", s.NS.Index)
	want := map[uint32][]collectors.AttachPoint{
		s.TCX:  {{LinkID: s.TCXLink, Type: "tcx", Target: eth0 + " ingress", Netns: netns}},
		s.XDP:  {{LinkID: s.XDPLink, Type: "xdp", Target: eth0, Netns: netns}},
		s.TC:   {{Type: "tc", Target: eth0 + " ingress", Netns: netns}},
		s.Host: {{LinkID: s.HostLink, Type: "tcx", Target: fmt.Sprintf("ifindex %d (%s) ingress", s.NS.Index, hostName)}},
	}
	for id, w := range want {
		if !reflect.DeepEqual(got[id], w) {
			t.Errorf("program %d: %+v, want %+v", id, got[id], w)
		}
	}
	if n := sc.Last().Namespaces; n < 1 {
		t.Errorf("Last().Namespaces = %d, want at least the test's", n)
	}
	if w := (collectors.AttachPoint{Type: "tcx", Target: eth0 + " ingress", Netns: netns}).NetnsTarget(); w != netns+" eth0 ingress" {
		t.Errorf("NetnsTarget = %q", w)
	}

	// bpftool net inside the namespace lists the XDP program and the
	// filter on eth0 (and the tcx link, from bpftool 7.3 on); the host's
	// bpftool net lists none of them.
	var sawTCX bool
	inNs := privtest.BpftoolNet(t, s.NS.Name)
	for _, w := range []privtest.NetAttached{
		{Kind: "xdp", Devname: "eth0", Ifindex: s.NS.Index, ID: s.XDP},
		{Kind: "tc", Devname: "eth0", Ifindex: s.NS.Index, Dir: "clsact/ingress", ID: s.TC},
	} {
		found := false
		for _, a := range inNs {
			found = found || a == w
			sawTCX = sawTCX || (a.ID == s.TCX && a.Devname == "eth0" && a.Dir == "tcx/ingress")
		}
		if !found {
			t.Errorf("bpftool net in %s does not list %+v: %+v", s.NS.Name, w, inNs)
		}
	}
	t.Logf("bpftool net in the namespace lists the tcx link: %v", sawTCX)
	out, err := exec.Command("bpftool", "net", "-j").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{s.XDP, s.TC} {
		if needle := fmt.Sprintf(`"id":%d}`, id); strings.Contains(string(out), needle) {
			t.Errorf("bpftool net on the host lists program %d: %s", id, out)
		}
	}
}

// TestAttachUnknownNetns: a tcx link on a device of a namespace that no
// process and no mount keeps (only an open file here) is in none the scan
// can enter: its target keeps the ifindex and drops the host end's name,
// which is another device's.
func TestAttachUnknownNetns(t *testing.T) {
	needTools(t)
	ns := privtest.VethIntoNetns(t)
	prog, id := load(t, ebpf.SchedCLS, ebpf.AttachTCXIngress, -1)
	var l link.Link
	err := privtest.InNetns("/run/netns/"+ns.Name, func() (err error) {
		l, err = link.AttachTCX(link.TCXOptions{Program: prog, Interface: ns.Index, Attach: ebpf.AttachTCXIngress})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keep, err := os.Open("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	_, got := attachNow(t, nil, nil)
	want := []collectors.AttachPoint{{LinkID: privtest.LinkID(t, l), Type: "tcx", Target: fmt.Sprintf("ifindex %d ingress", ns.Index), Netns: netspace.Unknown}}
	if !reflect.DeepEqual(got[id], want) {
		t.Errorf("tcx link in a namespace kept by an fd: %+v, want %+v", got[id], want)
	}
}
