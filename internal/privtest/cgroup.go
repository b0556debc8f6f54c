package privtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/spin"
)

// Cgroup is a cgroup v2 directory a test made.
type Cgroup struct {
	Path string // under the cgroup2 mount, as samples name it: "/bpfperf-test-1/a.service"
	Dir  string // on the file system
	ID   uint64 // its inode number: the id the kernel puts in samples
	fd   int
}

// MakeCgroup makes rel (slash-separated, "x.slice/y.service") under a
// directory of the test's own on the host's cgroup2 mount, wherever that
// is (/sys/fs/cgroup or, beside v1 controllers, /sys/fs/cgroup/unified),
// and removes it when the test ends, after its processes are gone. It
// skips where no cgroup2 is mounted.
func MakeCgroup(tb testing.TB, rel string) *Cgroup {
	tb.Helper()
	Root(tb)
	root, err := cgroupid.Mount("/proc/self/mountinfo")
	if err != nil {
		Skip(tb, err.Error())
	}
	top := "bpfperf-test-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(root, top, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Bottom-up: a cgroup goes only once it has no children.
		for d := dir; d != root; d = filepath.Dir(d) {
			os.Remove(d)
		}
	})
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		tb.Fatal(err)
	}
	return &Cgroup{Path: "/" + top + "/" + strings.Trim(rel, "/"), Dir: dir, ID: st.Ino, fd: fd}
}

// Remove removes the cgroup now, as systemd removes a stopped unit's
// (its processes must be gone).
func (c *Cgroup) Remove(tb testing.TB) {
	tb.Helper()
	if err := os.Remove(c.Dir); err != nil {
		tb.Fatalf("remove cgroup %s: %v", c.Path, err)
	}
}

// getppidEnv makes a test binary a getppid driver (HelperMain).
const getppidEnv = "BPFPERF_TEST_GETPPID"

// HelperMain turns the test binary into a helper process where one of
// this package's helpers started it; call it first in TestMain.
func HelperMain() {
	if v := os.Getenv(lateAttachEnv); v != "" {
		lateAttachMain(v)
	}
	if v := os.Getenv(burstEnv); v != "" {
		burstMain(v)
	}
	v := os.Getenv(getppidEnv)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad", getppidEnv, v)
		os.Exit(2)
	}
	for range n {
		syscall.Getppid()
	}
	// Alive a while after: a profiler that reads a task's cgroup from
	// /proc as its rings drain (at most a second later) still finds it.
	time.Sleep(1500 * time.Millisecond)
	os.Exit(0)
}

// Getppid starts a process, in cgroup c from its first instruction,
// that calls getppid(2) n times and exits 1.5 s later. The test binary must call
// HelperMain in its TestMain. Wait for it.
func (c *Cgroup) Getppid(tb testing.TB, n int) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), getppidEnv+"="+strconv.Itoa(n))
	return c.Start(tb, cmd)
}

// GetppidThreeToOne runs 3n getppid(2) calls from a process in a and n
// from one in b, at once, waits for both, and returns the CPU time the
// kernel charged each cgroup (cpu.stat), the split of time the trigger
// tests check bpfperf's sampled split against. Not 3:1 itself: the two
// run side by side only while b's driver lasts, and on a VM whose two
// vCPUs are one core's hyperthreads a call costs more while the other
// runs (2.39:1 on a clean AMD EPYC host, when 3:1 was the oracle).
func GetppidThreeToOne(tb testing.TB, a, b *Cgroup, n int) (cpuA, cpuB time.Duration) {
	tb.Helper()
	ca, cb := a.Getppid(tb, 3*n), b.Getppid(tb, n)
	if err := ca.Wait(); err != nil {
		tb.Fatal(err)
	}
	if err := cb.Wait(); err != nil {
		tb.Fatal(err)
	}
	return a.CPUTime(tb), b.CPUTime(tb)
}

// CPUTime is the CPU time the kernel charged the cgroup's tasks so far:
// usage_usec of its cpu.stat, which cgroup2 keeps without the cpu
// controller.
func (c *Cgroup) CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "cpu.stat"))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatalf("%s/cpu.stat: %q", c.Dir, line)
			}
			return time.Duration(us) * time.Microsecond
		}
	}
	tb.Fatalf("%s/cpu.stat has no usage_usec", c.Dir)
	return 0
}

// Start starts cmd in cgroup c from its first instruction (clone3's
// CLONE_INTO_CGROUP), killed when the test ends if still running.
func (c *Cgroup) Start(tb testing.TB, cmd *exec.Cmd) *exec.Cmd {
	tb.Helper()
	cmd.SysProcAttr = c.ProcAttr()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s in %s: %v", cmd.Path, c.Path, err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// ProcAttr starts a command in c from its first instruction, for a test
// that starts and waits for it itself.
func (c *Cgroup) ProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.fd}
}

// GetppidTracepoint attaches a program named name to the
// syscalls/sys_enter_getppid tracepoint that spins for iterations loop
// turns at each call, so that each run costs a measurable time. Both go
// when the test ends.
func GetppidTracepoint(tb testing.TB, name string, iterations int32) *ebpf.Program {
	tb.Helper()
	Tracefs(tb)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.TracePoint, License: "GPL",
		Instructions: spin.Loop(iterations),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { prog.Close() })
	l, err := link.Tracepoint("syscalls", "sys_enter_getppid", prog, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return prog
}

// GetppidBody is the getppid() function fentry can attach to: BTF names
// the body (__do_sys_getppid, at the entry point's address on x86-64),
// not the entry point.
var GetppidBody = map[string]string{"amd64": "__do_sys_getppid", "arm64": "__arm64_sys_getppid"}[runtime.GOARCH]

// GetppidFentry attaches an empty program named name with fentry to
// GetppidBody: it runs at each getppid() from a trampoline. Both go when
// the test ends; a kernel that refuses tracing programs skips the test.
func GetppidFentry(tb testing.TB, name string) *ebpf.Program {
	tb.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: GetppidBody, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		Skip(tb, fmt.Sprintf("fentry on %s refused: %v", GetppidBody, err))
	}
	tb.Cleanup(func() { prog.Close() })
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		Skip(tb, fmt.Sprintf("fentry on %s refused: %v", GetppidBody, err))
	}
	tb.Cleanup(func() { l.Close() })
	return prog
}

// KernelFuncID is the BTF type id of kernel function name.
func KernelFuncID(tb testing.TB, name string) uint32 {
	tb.Helper()
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		tb.Fatal(err)
	}
	var fn *btf.Func
	if err := kernel.TypeByName(name, &fn); err != nil {
		tb.Fatal(err)
	}
	id, err := kernel.TypeID(fn)
	if err != nil {
		tb.Fatal(err)
	}
	return uint32(id)
}

// TracingLinkTarget is the kernel's target of tracing link id as
// cilium/ebpf decodes it (bpftool 7.1 prints the attach type only): the
// BTF object's or the program's id, and the BTF type id in it.
func TracingLinkTarget(tb testing.TB, id uint32) (obj, typ uint32) {
	tb.Helper()
	l, err := link.NewFromID(link.ID(id))
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		tb.Fatal(err)
	}
	tr := info.Tracing()
	if tr == nil {
		tb.Fatalf("link %d is no tracing link: %+v", id, info)
	}
	return tr.TargetObjectId, uint32(tr.TargetBtfId)
}
