package collectors

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// uniqueName returns a program name (at most 15 chars) no other test run uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%08x", prefix, rand.Uint32())
}

// loadSocketFilter loads a uniquely named socket filter and closes it when
// the test ends. It returns the program and its id.
func loadSocketFilter(tb testing.TB, prefix string) (*ebpf.Program, uint32) {
	tb.Helper()
	prog, err := privtest.LoadSocketFilter(uniqueName(prefix))
	if err != nil {
		tb.Fatalf("load socket filter: %v", err)
	}
	tb.Cleanup(func() { prog.Close() })
	return prog, progID(tb, prog)
}

// loadProg loads `r0 = ret; exit` as a program of type typ.
func loadProg(tb testing.TB, typ ebpf.ProgramType, attach ebpf.AttachType, ret int32) *ebpf.Program {
	tb.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         uniqueName("t"),
		Type:         typ,
		AttachType:   attach,
		License:      "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, ret), asm.Return()},
	})
	if err != nil {
		tb.Fatalf("load %v program: %v", typ, err)
	}
	tb.Cleanup(func() { prog.Close() })
	return prog
}

func progID(tb testing.TB, prog *ebpf.Program) uint32 {
	tb.Helper()
	info, err := prog.Info()
	if err != nil {
		tb.Fatalf("program info: %v", err)
	}
	id, ok := info.ID()
	if !ok {
		tb.Fatal("kernel reports no program id")
	}
	return uint32(id)
}

// bpftool runs `bpftool <args> -j` and decodes its JSON into v.
func bpftool(tb testing.TB, v any, args ...string) {
	tb.Helper()
	out, err := exec.Command("bpftool", append(args, "-j")...).Output()
	if err != nil {
		tb.Fatalf("bpftool %v: %v: %s", args, err, exitStderr(err))
	}
	if err := json.Unmarshal(out, v); err != nil {
		tb.Fatalf("decode bpftool %v output: %v\n%s", args, err, out)
	}
}

func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// fdCount is the number of fds this process holds.
func fdCount(tb testing.TB) int {
	tb.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(fds)
}

func itoa(id uint32) string { return strconv.FormatUint(uint64(id), 10) }

func hexTag(tag [8]byte) string { return hex.EncodeToString(tag[:]) }
