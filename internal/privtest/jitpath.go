package privtest

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
	"golang.org/x/arch/arm64/arm64asm"
)

// JitedPathARM64 counts the machine instructions one run of prog executes
// in its arm64 JIT image (jited_prog_insns), for a program such as
// LoadLoop's: straight-line code around one loop whose backward branch is
// taken turns-1 times. It decodes the image in process (no objdump in the
// test VM) and walks it from the entry, following unconditional
// branches, to the first ret; words past it (the JIT's PLT and its
// literal) do not run and are not counted. body is the loop's length. A
// call, an indirect branch, a forward conditional branch or a second
// loop is an error: the path would no longer follow from the image alone.
func JitedPathARM64(prog *ebpf.Program, turns int) (path, body int, err error) {
	image, err := jitImage(prog)
	if err != nil {
		return 0, 0, err
	}
	return pathARM64(image, turns)
}

// JitedPath is the instructions one run of a LoadLoop-shaped program of
// turns turns executes in its JIT image: JitedPathARM64 on arm64, body ×
// turns + the rest of JitedLoop's objdump elsewhere.
func JitedPath(prog *ebpf.Program, turns int) (int, error) {
	if runtime.GOARCH == "arm64" {
		path, _, err := JitedPathARM64(prog, turns)
		return path, err
	}
	body, rest, err := JitedLoop(prog)
	return body*turns + rest, err
}

func pathARM64(image []byte, turns int) (path, body int, err error) {
	if len(image)%4 != 0 {
		return 0, 0, fmt.Errorf("arm64 image of %d bytes: not whole instructions", len(image))
	}
	loopAt := -1
	for pc, steps := 0, 0; ; steps++ {
		if pc < 0 || pc >= len(image) || steps > len(image) {
			return 0, 0, fmt.Errorf("path leaves the %d-byte image at %#x", len(image), pc)
		}
		word := binary.LittleEndian.Uint32(image[pc:])
		inst, err := arm64asm.Decode(image[pc : pc+4])
		if err != nil {
			return 0, 0, fmt.Errorf("decode %#08x at %#x: %w", word, pc, err)
		}
		path++
		target, branch := branchTarget(inst, pc)
		switch {
		case inst.Op == arm64asm.RET:
			if loopAt < 0 {
				return 0, 0, fmt.Errorf("no loop on the path to ret at %#x", pc)
			}
			return path, body, nil
		case inst.Op == arm64asm.BL || inst.Op == arm64asm.BLR || inst.Op == arm64asm.BR:
			return 0, 0, fmt.Errorf("%v at %#x leaves the image", inst, pc)
		case !branch:
			pc += 4
		case inst.Op == arm64asm.B && isUnconditional(inst):
			pc = target
		case target > pc:
			return 0, 0, fmt.Errorf("forward conditional branch %v at %#x: the path depends on data", inst, pc)
		case loopAt >= 0:
			return 0, 0, fmt.Errorf("second loop at %#x (the first ends at %#x)", pc, loopAt)
		default:
			// Walking straight through, the body ran once; the branch
			// takes it turns-1 more times, then falls through.
			loopAt, body = pc, (pc-target)/4+1
			path += body * (turns - 1)
			pc += 4
		}
	}
}

// branchTarget is the image offset a direct branch at pc goes to.
func branchTarget(inst arm64asm.Inst, pc int) (int, bool) {
	switch inst.Op {
	case arm64asm.B, arm64asm.CBZ, arm64asm.CBNZ, arm64asm.TBZ, arm64asm.TBNZ:
	default:
		return 0, false
	}
	for _, a := range inst.Args {
		if rel, ok := a.(arm64asm.PCRel); ok {
			return pc + int(rel), true
		}
	}
	return 0, false
}

// isUnconditional tells "b label" from "b.cond label", which arm64asm
// decodes to the same Op with a condition first.
func isUnconditional(inst arm64asm.Inst) bool {
	_, cond := inst.Args[0].(arm64asm.Cond)
	return !cond
}
