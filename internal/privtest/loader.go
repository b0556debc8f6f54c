package privtest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
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
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R1, int32(turns)),
			asm.Sub.Imm(asm.R1, 1).WithSymbol("loop"),
			asm.JNE.Imm(asm.R1, 0, "loop"),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
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
