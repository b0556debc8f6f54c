package privtest

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// PipeRead is the kernel function BlockInPipeRead makes threads wait in:
// return probes on it hold an instance for as long as a read blocks.
const PipeRead = "pipe_read"

// LoadKprobe loads `r0 = 0; exit` as a kprobe program, for a kprobe or
// kretprobe link (attach ebpf.AttachNone) or a kprobe_multi one
// (ebpf.AttachTraceKprobeMulti).
func LoadKprobe(name string, attach ebpf.AttachType) (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.Kprobe, AttachType: attach, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
}

// BlockInPipeRead has n threads each read a blocking pipe of its own, all
// at once, waits until all n sleep in pipe_read, then writes each a byte
// and waits for every read to return. Go's own pipes are non-blocking and
// never wait in pipe_read; these do. With return probes on pipe_read that
// keep fewer than n instances, the kernel misses the rest: each read either
// runs the probe's program at its return or counts as missed.
func BlockInPipeRead(tb testing.TB, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	writers := make([]int, n)
	errs := make(chan error, n)
	for i := range n {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			tb.Fatal(err)
		}
		writers[i] = p[1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer unix.Close(p[0])
			if _, err := unix.Read(p[0], make([]byte, 1)); err != nil {
				errs <- err
			}
		}()
	}
	// Under TCG a thread may take a while to get as far as sleeping.
	deadline := time.Now().Add(10 * time.Second)
	for got := 0; got < n; got = threadsIn(PipeRead) {
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d threads blocked in %s after 10 s", got, n, PipeRead)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range writers {
		unix.Write(w, []byte{1})
		unix.Close(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatalf("read: %v", err)
	}
}

// threadsIn counts this process's threads asleep in the kernel function fn
// (their /proc wchan).
func threadsIn(fn string) int {
	tasks, _ := os.ReadDir("/proc/self/task")
	n := 0
	for _, task := range tasks {
		if b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/wchan"); err == nil && string(b) == fn {
			n++
		}
	}
	return n
}
