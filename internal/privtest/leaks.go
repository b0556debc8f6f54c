package privtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RunCheckingLeaks runs a package's tests and fails them when they leave
// more perf event or BPF object file descriptors open than before: call
// it from TestMain, as os.Exit(privtest.RunCheckingLeaks(m)).
func RunCheckingLeaks(m *testing.M) int {
	before := KernelFDs()
	code := m.Run()
	if after := KernelFDs(); code == 0 && after > before {
		fmt.Fprintf(os.Stderr, "leaked %d perf event or BPF file descriptors\n", after-before)
		code = 1
	}
	return code
}

// KernelFDs is how many perf event and BPF object file descriptors this
// process holds.
func KernelFDs() int { return len(kernelFDs()) }

// KernelObjects is how many perf events and BPF objects this process
// holds open, each once however many fds it has (a dup of a ring's fd
// in Go's poller, say). Where kcmp(2) is missing it counts fds.
func KernelObjects() int {
	var distinct []int
	for _, fd := range kernelFDs() {
		seen := false
		for _, d := range distinct {
			if sameFile(fd, d) {
				seen = true
				break
			}
		}
		if !seen {
			distinct = append(distinct, fd)
		}
	}
	return len(distinct)
}

func kernelFDs() []int {
	ents, _ := os.ReadDir("/proc/self/fd")
	var fds []int
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(target, "anon_inode:[perf_event]") || strings.HasPrefix(target, "anon_inode:bpf") {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				fds = append(fds, fd)
			}
		}
	}
	return fds
}

// sameFile says whether two of this process's fds are one open file.
func sameFile(a, b int) bool {
	const kcmpFile = 0 // KCMP_FILE
	pid := uintptr(os.Getpid())
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, pid, pid, kcmpFile, uintptr(a), uintptr(b), 0)
	return errno == 0 && r == 0
}

// WaitFor polls cond every millisecond for up to 5 s, and fails the test
// naming what it waited for if cond never held.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	tb.Fatalf("timed out waiting for %s", what)
}
