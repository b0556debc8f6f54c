// Command tploader is a BPF loader for test containers, built static into
// an image of its own (node.BuildImage): it loads a tracepoint program
// named NAME that loops TURNS times at each run (another count is another
// program: a new version), attaches it with a perf link to the tracepoint
// whose id is TPID, and holds it until it is told to stop. The id comes
// from the host's tracefs: a container has none mounted. With drive, it
// calls getppid(2) as fast as it can for SECONDS instead, then waits: a
// pod's workload that makes a sys_enter_getppid program run.
//
//	tploader NAME TURNS TPID
//	tploader drive SECONDS
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/spin"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tploader:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	// SIGTERM first: as pid 1 the kernel ignores it without a handler,
	// and StopContainer would wait its whole timeout.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if len(args) == 2 && args[0] == "drive" {
		secs, err := strconv.ParseFloat(args[1], 64)
		if err != nil {
			return fmt.Errorf("usage: tploader drive SECONDS")
		}
		for end := time.Now().Add(time.Duration(secs * float64(time.Second))); time.Now().Before(end); {
			for range 1000 {
				syscall.Getppid()
			}
		}
		<-stop
		return nil
	}
	if len(args) != 3 {
		return fmt.Errorf("usage: tploader NAME TURNS TPID | tploader drive SECONDS")
	}
	turns, err1 := strconv.Atoi(args[1])
	tp, err2 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("usage: tploader NAME TURNS TPID")
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: args[0], Type: ebpf.TracePoint, License: "GPL",
		Instructions: spin.Loop(int32(turns)),
	})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer prog.Close()
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: uint64(tp), Sample: 1, Wakeup: 1}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("perf_event_open tracepoint %d: %w", tp, err)
	}
	defer unix.Close(fd)
	l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	defer l.Close()
	fmt.Println("loaded", args[0])
	<-stop
	return nil
}
