package holders

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestBriefFdsAreNoHolding: while the daemon reads a program it does not
// hold (its metadata, over and over, as it does for new programs and
// symbols), its scans of who holds what never list it as a holder. The
// program is held by a pin alone.
func TestBriefFdsAreNoHolding(t *testing.T) {
	privtest.Root(t)
	fs := t.TempDir()
	if err := unix.Mount("bpf", fs, "bpf", 0, ""); err != nil {
		privtest.Skip(t, "mount bpffs: "+err.Error())
	}
	t.Cleanup(func() { unix.Unmount(fs, unix.MNT_DETACH) })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "brief", Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Pin(filepath.Join(fs, "brief")); err != nil {
		t.Fatal(err)
	}
	info, _ := prog.Info()
	id64, _ := info.ID()
	id := uint32(id64)
	prog.Close() // the pin holds it now

	h := New("/proc", slog.New(slog.DiscardHandler))
	defer h.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				collectors.ReadMeta(id)
			}
		}
	}()
	const scans = 2000
	seen := 0
	for range scans {
		hs, err := h.Scan()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range hs.Progs[id] {
			if o.PID == os.Getpid() {
				seen++
			}
		}
	}
	close(stop)
	wg.Wait()
	if seen > 0 {
		t.Errorf("%d of %d scans list this process among the holders of a program it only reads", seen, scans)
	}
}
