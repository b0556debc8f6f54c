package hooks

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The syscall hooks see getppid(): cheap, made by nobody else at any
// rate, and reached by every kind of hook below. kprobes go on the
// syscall's entry point on this architecture; fentry needs a name in the
// kernel's BTF, which on x86-64 has the body (__do_sys_getppid, at the
// entry point's address) and not the entry point.
var (
	getppidFunc  = map[string]string{"amd64": "__x64_sys_getppid", "arm64": "__arm64_sys_getppid"}[runtime.GOARCH]
	getppidEntry = map[string]string{"amd64": "__do_sys_getppid", "arm64": "__arm64_sys_getppid"}[runtime.GOARCH]
)

func syscallHooks() []hook {
	const event = "getppid() calls"
	return []hook{
		{"tracepoint", event, syscallSite(ebpf.TracePoint, ebpf.AttachNone, "", func(p *ebpf.Program) (io.Closer, error) {
			return link.Tracepoint("syscalls", "sys_enter_getppid", p, nil)
		})},
		// raw_tp and tp_btf on sys_enter see every system call on the
		// host, not only getppid(): runs per event says how many.
		{"raw_tp", event, syscallSite(ebpf.RawTracepoint, ebpf.AttachNone, "", func(p *ebpf.Program) (io.Closer, error) {
			return link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: p})
		})},
		{"tp_btf", event, syscallSite(ebpf.Tracing, ebpf.AttachTraceRawTp, "sys_enter", func(p *ebpf.Program) (io.Closer, error) {
			return link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		})},
		{"fentry", event, syscallSite(ebpf.Tracing, ebpf.AttachTraceFEntry, getppidEntry, func(p *ebpf.Program) (io.Closer, error) {
			return link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceFEntry})
		})},
		{"kprobe", event, syscallSite(ebpf.Kprobe, ebpf.AttachNone, "", func(p *ebpf.Program) (io.Closer, error) {
			return link.Kprobe(getppidFunc, p, nil)
		})},
	}
}

// syscallSite loads a program of type typ that returns 0, attached by
// attach, and makes getppid() calls as its events.
func syscallSite(typ ebpf.ProgramType, attachType ebpf.AttachType, attachTo string, attach func(*ebpf.Program) (io.Closer, error)) func(Config) (*site, error) {
	return func(cfg Config) (*site, error) {
		if getppidFunc == "" && (typ == ebpf.Kprobe || attachType == ebpf.AttachTraceFEntry) {
			return nil, fmt.Errorf("no getppid entry point known on %s", runtime.GOARCH)
		}
		prog, err := load(&ebpf.ProgramSpec{Type: typ, AttachType: attachType, AttachTo: attachTo}, 0)
		if err != nil {
			return nil, err
		}
		// Attach once now, so that a kernel that loads the program
		// but refuses to attach it says so before any round.
		l, err := attach(prog)
		if err != nil {
			prog.Close()
			return nil, refused("attach", err)
		}
		l.Close()
		return &site{
			prog:   prog,
			attach: func() (io.Closer, error) { return attach(prog) },
			fire: func(n int) error {
				for range n {
					unix.Getppid()
				}
				return nil
			},
			events: cfg.Syscalls,
			close:  func() { prog.Close() },
		}, nil
	}
}

// load loads spec as a minimal program: r0 = ret, return.
func load(spec *ebpf.ProgramSpec, ret int32) (*ebpf.Program, error) {
	spec = spec.Copy()
	spec.Name = "bpfperf_hook"
	spec.License = "GPL"
	spec.Instructions = asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, refused("load", err)
	}
	return prog, nil
}

// refused words a kernel's refusal as one line: what it refused, and
// why where that is known.
func refused(what string, err error) error {
	// cilium/ebpf adds this hint to any EPERM; Measure has removed the
	// limit, so it would only mislead.
	msg := strings.Replace(err.Error(), " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", "", 1)
	switch {
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("this kernel refuses to %s it (not supported): %s", what, msg)
	case (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) && os.Geteuid() != 0:
		return fmt.Errorf("not permitted to %s it (needs root): %s", what, msg)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("this kernel refuses to %s it, even for root: %s", what, msg)
	}
	return fmt.Errorf("this kernel refuses to %s it: %s", what, msg)
}
