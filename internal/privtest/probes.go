package privtest

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// GetppidEntry is the kernel function every getppid() enters, on which
// kprobes, kretprobes and kprobe_multi attach (BTF's GetppidBody may be
// inlined into it on x86-64, and is then no probe point).
var GetppidEntry = map[string]string{"amd64": "__x64_sys_getppid", "arm64": "__arm64_sys_getppid"}[runtime.GOARCH]

// uprobeTargetOffset is UprobeTarget's code's offset in the executable
// file: `go test` strips the symbol table, so the probe is placed by
// offset, from the code's address and the executable's load segments.
func uprobeTargetOffset(path string) (uint64, error) {
	addr := uint64(uprobeTargetAddr())
	if addr == 0 {
		return 0, fmt.Errorf("no assembly UprobeTarget on %s", runtime.GOARCH)
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return 0, fmt.Errorf("%s is position-independent: its load address is not its link address", path)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= addr && addr < p.Vaddr+p.Memsz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("UprobeTarget's address %#x is in no executable segment of %s", addr, path)
}

// ProbeKinds are the kinds Probe attaches on this kernel: uprobes
// everywhere, kprobes where the kernel has them (not this host's),
// kprobe_multi where it has fprobe (Debian's 6.12, not its 6.1).
func ProbeKinds() []string {
	kinds := []string{"uprobe", "uretprobe"}
	if _, err := os.Stat("/sys/kernel/tracing/kprobe_events"); err == nil {
		kinds = append(kinds, "kprobe", "kretprobe")
	}
	if features.HaveBPFLinkKprobeMulti() == nil {
		kinds = append(kinds, "kprobe_multi")
	}
	return kinds
}

// Probe attaches `r0 = 0; exit`, named name, as the probe kind says:
// "kprobe", "kretprobe" or "kprobe_multi" on GetppidEntry, "uprobe" or
// "uretprobe" on UprobeTarget in this test binary. Both go when the test
// ends; a kernel that refuses the kind skips the test.
func Probe(tb testing.TB, kind, name string) *ebpf.Program {
	tb.Helper()
	attachType := ebpf.AttachNone
	if kind == "kprobe_multi" {
		attachType = ebpf.AttachTraceKprobeMulti
	}
	prog, err := LoadKprobe(name, attachType)
	if err != nil {
		Skip(tb, fmt.Sprintf("%s program refused: %v", kind, err))
	}
	tb.Cleanup(func() { prog.Close() })
	var l link.Link
	switch kind {
	case "kprobe":
		l, err = link.Kprobe(GetppidEntry, prog, nil)
	case "kretprobe":
		l, err = link.Kretprobe(GetppidEntry, prog, nil)
	case "kprobe_multi":
		l, err = link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: []string{GetppidEntry}})
	case "uprobe", "uretprobe":
		self, err := os.Executable()
		if err != nil {
			tb.Fatal(err)
		}
		off, err := uprobeTargetOffset(self)
		if err != nil {
			Skip(tb, err.Error())
		}
		ex, err := link.OpenExecutable(self)
		if err != nil {
			tb.Fatal(err)
		}
		opts := &link.UprobeOptions{Address: off}
		if kind == "uprobe" {
			l, err = ex.Uprobe("UprobeTarget", prog, opts)
		} else {
			l, err = ex.Uretprobe("UprobeTarget", prog, opts)
		}
	default:
		tb.Fatalf("no probe kind %q", kind)
	}
	if err != nil {
		Skip(tb, fmt.Sprintf("%s refused: %v", kind, err))
	}
	tb.Cleanup(func() { l.Close() })
	return prog
}

// PinnedLoop calls drive in batches of batch on an OS thread of its own,
// pinned to CPU 0, for d: a workload a profile of one thread can count
// calls of. It returns the thread's id at once, and wait, which returns
// the calls made once the loop is over.
func PinnedLoop(d time.Duration, batch int, drive func()) (tid int, wait func() (calls int, err error)) {
	type loop struct {
		tid, calls int
		err        error
	}
	started, done := make(chan int), make(chan loop)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l := loop{tid: unix.Gettid()}
		var cpus unix.CPUSet
		cpus.Set(0)
		l.err = unix.SchedSetaffinity(0, &cpus)
		started <- l.tid
		for stop := time.Now().Add(d); time.Now().Before(stop); l.calls += batch {
			for range batch {
				drive()
			}
		}
		done <- l
	}()
	return <-started, func() (int, error) {
		l := <-done
		return l.calls, l.err
	}
}
