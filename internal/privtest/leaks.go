package privtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
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
func KernelFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(target, "anon_inode:[perf_event]") || strings.HasPrefix(target, "anon_inode:bpf") {
			n++
		}
	}
	return n
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
