package privtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/spin"
)

// lateAttachEnv makes a test binary a loader that attaches late
// (lateAttachMain): "NAME,TURNS,PIN,DELAY".
const lateAttachEnv = "BPFPERF_TEST_LATE_ATTACH"

// AttachLate starts a process in cgroup c, as a unit's loader would be,
// that loads a syscalls/sys_enter_getppid tracepoint program named name
// (a loop of turns turns: another count is another version), attaches it
// delay later, pins the link at pin and exits: the program lives on,
// attached, held by the pin. The test binary must call HelperMain in its
// TestMain. It returns once the loader exited, with its pid.
func (c *Cgroup) AttachLate(tb testing.TB, name string, turns int32, pin string, delay time.Duration) (pid int) {
	tb.Helper()
	Tracefs(tb)
	BPFFS(tb)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s,%d", lateAttachEnv, name, turns, pin, delay.Milliseconds()))
	c.Start(tb, cmd)
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("late attacher %s: %v", name, err)
	}
	tb.Cleanup(func() { os.Remove(pin) })
	return cmd.Process.Pid
}

// lateAttachMain is AttachLate's process.
func lateAttachMain(v string) {
	f := strings.Split(v, ",")
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "late attacher:", err)
		os.Exit(2)
	}
	if len(f) != 4 {
		fail(fmt.Errorf("%s=%q: want NAME,TURNS,PIN,DELAY_MS", lateAttachEnv, v))
	}
	turns, err1 := strconv.Atoi(f[1])
	delay, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		fail(fmt.Errorf("%s=%q: want NAME,TURNS,PIN,DELAY_MS", lateAttachEnv, v))
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: f[0], Type: ebpf.TracePoint, License: "GPL",
		Instructions: spin.Loop(int32(turns)),
	})
	if err != nil {
		fail(err)
	}
	time.Sleep(time.Duration(delay) * time.Millisecond)
	l, err := link.Tracepoint("syscalls", "sys_enter_getppid", prog, nil)
	if err != nil {
		fail(err)
	}
	if err := l.Pin(f[2]); err != nil {
		fail(err)
	}
	os.Exit(0)
}

// burstEnv makes a test binary a loader of many programs at once
// (burstMain): "NAME,N".
const burstEnv = "BPFPERF_TEST_LOAD_BURST"

// Burst is a process that loaded many programs and holds them.
type Burst struct {
	PID int
	IDs []uint32
	cmd *exec.Cmd
}

// LoadBurst starts a process in cgroup c, as a unit's loader would be,
// that loads n socket filter programs named name as fast as it can (each
// returns another constant, so each is another program) and holds them
// until the test ends. It returns once all are loaded, with their ids.
// The test binary must call HelperMain in its TestMain.
func (c *Cgroup) LoadBurst(tb testing.TB, name string, n int) *Burst {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", burstEnv, name, n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	c.Start(tb, cmd)
	tb.Cleanup(func() { stdin.Close() })
	b := &Burst{PID: cmd.Process.Pid, cmd: cmd}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		id, err := strconv.ParseUint(lines.Text(), 10, 32)
		if err != nil {
			tb.Fatalf("burst loader: %q", lines.Text())
		}
		b.IDs = append(b.IDs, uint32(id))
		if len(b.IDs) == n {
			return b
		}
	}
	tb.Fatalf("burst loader stopped after %d of %d loads", len(b.IDs), n)
	return nil
}

// burstMain is LoadBurst's process: it prints each program's id once all
// are loaded (printing between loads would slow the burst), then holds
// them until its stdin closes.
func burstMain(v string) {
	name, count, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want NAME,N\n", burstEnv, v)
		os.Exit(2)
	}
	progs := make([]*ebpf.Program, 0, n)
	for i := range n {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: name, Type: ebpf.SocketFilter, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(i)), asm.Return()},
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "burst loader: load %d of %d: %v\n", i+1, n, err)
			os.Exit(2)
		}
		progs = append(progs, prog)
	}
	out := bufio.NewWriter(os.Stdout)
	for _, p := range progs {
		info, err := p.Info()
		if err != nil {
			fmt.Fprintln(os.Stderr, "burst loader:", err)
			os.Exit(2)
		}
		id, _ := info.ID()
		fmt.Fprintln(out, id)
	}
	out.Flush()
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// LoadOnCPU loads a socket filter from a thread bound to cpu, unloads it,
// and returns its id: a load record made on that CPU's ring.
func LoadOnCPU(tb testing.TB, cpu int) uint32 {
	tb.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		tb.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &all)
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		tb.Fatalf("bind to cpu %d: %v", cpu, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		tb.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		tb.Fatal(err)
	}
	id, _ := info.ID()
	return uint32(id)
}

// LoadOnEachCPU loads and unloads a program (LoadOnCPU) on every CPU the
// caller may run on, in turn, and returns their ids.
func LoadOnEachCPU(tb testing.TB) []uint32 {
	tb.Helper()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		tb.Fatal(err)
	}
	var ids []uint32
	for cpu := range runtime.NumCPU() * 4 {
		if all.IsSet(cpu) {
			ids = append(ids, LoadOnCPU(tb, cpu))
		}
	}
	return ids
}
