package daemon_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestDevicesInNetns: a tcx link, an XDP link and a netlink TC filter on
// eth0 inside a network namespace set up as a pod's, where eth0's ifindex
// is the veth's host end's out here, are shown by the namespace and eth0
// in progs' WHERE, in their identities and in show's attach line; the tcx
// link on the host end reads as before. The oracle is bpftool net run
// inside the namespace.
func TestDevicesInNetns(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	d := startDaemon(t, t.TempDir())
	s := privtest.ProgramsInPodNetns(t)
	rows := settledRows(t, d, s.TCX, s.XDP, s.TC, s.Host)

	in := "netns " + s.NS.Name
	host := s.NS.Host.Attrs().Name
	for id, want := range map[uint32]string{
		s.TCX:  "tcx " + in + " eth0 ingress",
		s.XDP:  "xdp " + in + " eth0",
		s.TC:   "tc " + in + " eth0 ingress",
		s.Host: "tcx dev " + host + " ingress",
	} {
		r := rows[id]
		if r.Where != want {
			t.Errorf("program %d: where %q, want %q", id, r.Where, want)
		}
		if !strings.Contains(r.Identity, " at "+want) {
			t.Errorf("program %d: identity %q, want it at %q", id, r.Identity, want)
		}
	}
	out := d.cli(t, "show", strconv.FormatUint(uint64(s.TCX), 10))
	if want := fmt.Sprintf("tcx ifindex %d (eth0) ingress in %s (link %d)", s.NS.Index, in, s.TCXLink); !strings.Contains(out, want) {
		t.Errorf("show does not say %q:\n%s", want, out)
	}

	// The kernel's view through bpftool, inside the namespace: the XDP
	// program and the filter are on its eth0, of that ifindex.
	seen := map[uint32]bool{}
	for _, a := range privtest.BpftoolNet(t, s.NS.Name) {
		if a.Devname == "eth0" && a.Ifindex == s.NS.Index {
			seen[a.ID] = true
		}
	}
	if !seen[s.XDP] || !seen[s.TC] {
		t.Errorf("bpftool net in %s: eth0 has programs %v, want %d (xdp) and %d (tc)", s.NS.Name, seen, s.XDP, s.TC)
	}
}
