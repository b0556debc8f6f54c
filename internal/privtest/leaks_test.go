package privtest

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KernelObjects counts an event once however many fds it has, and a
// second event again.
func TestKernelObjects(t *testing.T) {
	if os.Geteuid() != 0 {
		Skip(t, "needs root")
	}
	open := func() int {
		attr := &unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_DUMMY, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
		fd, err := unix.PerfEventOpen(attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	before, fds := KernelObjects(), KernelFDs()
	fd := open()
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	if got := KernelObjects(); got != before+1 {
		t.Errorf("an event and its dup: %d objects, want %d", got, before+1)
	}
	if got := KernelFDs(); got != fds+2 {
		t.Errorf("an event and its dup: %d fds, want %d", got, fds+2)
	}
	open()
	if got := KernelObjects(); got != before+2 {
		t.Errorf("two events, one with a dup: %d objects, want %d", got, before+2)
	}
}
