package collectors

import (
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// mountBPFFS mounts a private bpffs for the test.
func mountBPFFS(t *testing.T) string {
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
