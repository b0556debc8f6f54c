package privtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"

	"github.com/cilium/ebpf"
)

// JitedLoop disassembles prog's JIT image (jited_prog_insns) with objdump
// and finds its one loop, the backward branch: body is the machine
// instructions from the branch's target to the branch itself, which run
// once per turn, and rest the other instructions of the image. For a
// program such as LoadLoop's, with no other branch, a run executes
// body × turns + rest instructions: the truth a hardware instructions
// count must match. Needs objdump (binutils), x86-64 or arm64.
func JitedLoop(prog *ebpf.Program) (body, rest int, err error) {
	image, err := jitImage(prog)
	if err != nil {
		return 0, 0, err
	}
	arch := map[string]string{"amd64": "i386:x86-64", "arm64": "aarch64"}[runtime.GOARCH]
	if arch == "" {
		return 0, 0, fmt.Errorf("disassemble a %s JIT image: not known", runtime.GOARCH)
	}
	file := filepath.Join(os.TempDir(), fmt.Sprintf("bpfperf-jit-%d.bin", os.Getpid()))
	if err := os.WriteFile(file, image, 0o600); err != nil {
		return 0, 0, err
	}
	defer os.Remove(file)
	out, err := exec.Command("objdump", "-D", "-b", "binary", "-m", arch, file).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("objdump: %w", err)
	}
	return loopOf(out)
}

// jitImage is prog's JIT image (jited_prog_insns).
func jitImage(prog *ebpf.Program) ([]byte, error) {
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("program info: %w", err)
	}
	image, ok := info.JitedInsns()
	if !ok || len(image) == 0 {
		return nil, fmt.Errorf("no JIT image (is the JIT on? CAP_SYS_ADMIN?)")
	}
	return image, nil
}

// objdump's lines: "  1c:	48 83 ef 01          	sub    $0x1,%rdi", and a
// branch's operand starts with its target's address ("jne    0x18",
// "b.ne	0x18", "cbnz	x0, 0x18").
var (
	insnLine = regexp.MustCompile(`^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*\t(\S+)\s*(.*)$`)
	armInsn  = regexp.MustCompile(`^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+\t(\S+)\s*(.*)$`)
	target   = regexp.MustCompile(`(?:^|, )0x([0-9a-f]+)\b`)
)

// loopOf counts the instructions of objdump's disassembly inside and
// outside its one backward branch's loop.
func loopOf(dump []byte) (body, rest int, err error) {
	var addrs []uint64
	from, to := -1, -1
	sc := bufio.NewScanner(bytes.NewReader(dump))
	for sc.Scan() {
		m := insnLine.FindStringSubmatch(sc.Text())
		if m == nil {
			m = armInsn.FindStringSubmatch(sc.Text())
		}
		if m == nil {
			continue
		}
		addr, _ := strconv.ParseUint(m[1], 16, 64)
		addrs = append(addrs, addr)
		op := m[2]
		if op[0] != 'j' && op[0] != 'b' && op != "cbnz" && op != "cbz" {
			continue
		}
		t := target.FindStringSubmatch(m[3])
		if t == nil {
			continue
		}
		dst, _ := strconv.ParseUint(t[1], 16, 64)
		if dst < addr {
			if from >= 0 {
				return 0, 0, fmt.Errorf("more than one backward branch in the JIT image")
			}
			to = len(addrs) - 1
			for i, a := range addrs {
				if a == dst {
					from = i
				}
			}
			if from < 0 {
				return 0, 0, fmt.Errorf("backward branch at %#x to %#x, not an instruction's start", addr, dst)
			}
		}
	}
	if from < 0 {
		return 0, 0, fmt.Errorf("no backward branch in %d instructions of the JIT image", len(addrs))
	}
	body = to - from + 1
	return body, len(addrs) - body, nil
}
