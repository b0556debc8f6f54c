package collectors

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// mountBPFFS mounts a private bpffs for the test.
func mountBPFFS(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		privtest.Skip(t, "mount bpffs: "+err.Error())
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestScanPins: a map and a program pinned and let go by this process
// are found under their pin paths; the scan holds neither.
func TestScanPins(t *testing.T) {
	privtest.Root(t)
	root := mountBPFFS(t)
	m, mapID := newTestMap(t, ebpf.Hash, 4, 10)
	prog, progID := loadSocketFilter(t, "pin")
	mapPin, progPin := filepath.Join(root, "flows"), filepath.Join(root, "sub_filter")
	if err := m.Pin(mapPin); err != nil {
		t.Fatal(err)
	}
	if err := prog.Pin(progPin); err != nil {
		t.Fatal(err)
	}
	m.Close()
	prog.Close()
	before := countMapFds(t)
	p := ScanPins(root)
	if p.Maps[mapID] != mapPin || p.Progs[progID] != progPin {
		t.Errorf("pins %+v, want map %d at %s and program %d at %s", p, mapID, mapPin, progID, progPin)
	}
	if after := countMapFds(t); after != before {
		t.Errorf("map fds %d before the scan, %d after", before, after)
	}
	if p := ScanPins(filepath.Join(root, "missing")); len(p.Maps)+len(p.Progs) != 0 {
		t.Errorf("pins of a missing root: %+v", p)
	}
}

// TestPinScannerReadsOnlyNewPins: a second scan opens nothing it read
// before and finds the same pins; a program pinned anew at a path it
// knew, and a pinned link updated to another program, are each read
// again and named as bpftool names them; an unpinned path is gone.
func TestPinScannerReadsOnlyNewPins(t *testing.T) {
	privtest.Root(t)
	root := mountBPFFS(t)
	m, mapID := newTestMap(t, ebpf.Hash, 4, 10)
	first, _ := loadSocketFilter(t, "pin_a")
	mapPin, progPin, linkPin := filepath.Join(root, "flows"), filepath.Join(root, "dir", "filter"), filepath.Join(root, "link")
	os.Mkdir(filepath.Dir(progPin), 0o755)
	if err := m.Pin(mapPin); err != nil {
		t.Fatal(err)
	}
	if err := first.Pin(progPin); err != nil {
		t.Fatal(err)
	}
	cg := privtest.MakeCgroup(t, "pins")
	ingress := loadProg(t, ebpf.CGroupSKB, ebpf.AttachCGroupInetIngress, 1)
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg.Dir, Attach: ebpf.AttachCGroupInetIngress, Program: ingress})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Pin(linkPin); err != nil {
		t.Fatal(err)
	}
	defer l.Unpin()

	s := NewPinScanner(root)
	check := func(when string, opened int) {
		t.Helper()
		p := s.Scan()
		want := map[uint32]string{bpftoolPinnedID(t, "prog", progPin): progPin, bpftoolPinnedID(t, "link", linkPin): linkPin}
		if p.Maps[mapID] != mapPin || len(p.Maps) != 1 || fmt.Sprint(p.Progs) != fmt.Sprint(want) {
			t.Errorf("%s: pins %+v, want map %d at %s and programs %v (bpftool)", when, p, mapID, mapPin, want)
		}
		if p.Opened != opened {
			t.Errorf("%s: the scan opened %d pinned objects, want %d", when, p.Opened, opened)
		}
	}
	check("first scan", 3)
	check("second scan", 1) // the link only

	// The same path pins another program: a new inode, read again.
	os.Remove(progPin)
	second, _ := loadSocketFilter(t, "pin_b")
	if err := second.Pin(progPin); err != nil {
		t.Fatal(err)
	}
	// The link moves to another program under the same inode.
	if err := l.Update(loadProg(t, ebpf.CGroupSKB, ebpf.AttachCGroupInetIngress, 1)); err != nil {
		t.Fatal(err)
	}
	check("after a re-pin and a link update", 2)

	os.Remove(mapPin)
	if p := s.Scan(); len(p.Maps) != 0 {
		t.Errorf("after the map's pin went: %+v", p.Maps)
	}
}

// bpftoolPinnedID is the program id bpftool reads from a pinned program
// or link: the oracle for what a pin pins.
func bpftoolPinnedID(t *testing.T, kind, path string) uint32 {
	t.Helper()
	out, err := exec.Command("bpftool", "-j", kind, "show", "pinned", path).Output()
	if err != nil {
		t.Fatalf("bpftool %s show pinned %s: %v", kind, path, err)
	}
	var v struct {
		ID     uint32 `json:"id"`
		ProgID uint32 `json:"prog_id"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("bpftool %s show pinned: %v: %s", kind, err, out)
	}
	if kind == "link" {
		return v.ProgID
	}
	return v.ID
}
