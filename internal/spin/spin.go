// Package spin is the body of the test programs whose runs cost a chosen
// time: a loop of a given number of turns. Another count is another
// program (another tag), which the identity tests take for a new version,
// and a larger one a slower version.
package spin

import "github.com/cilium/ebpf/asm"

// Loop is a program that loops turns times and returns 0 (turns > 0).
func Loop(turns int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, turns),
		asm.Sub.Imm(asm.R1, 1).WithSymbol("loop"),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
}
