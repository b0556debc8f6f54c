// Package btfprog loads a socket filter whose main function has BTF: the
// smallest target fentry/fexit can attach to. The daemon loads one to
// probe exact counters and to calibrate latency windows; tests load them
// as targets.
package btfprog

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// Load loads insns as a socket filter named name whose main function has
// BTF, which fentry/fexit need to attach to it.
func Load(name string, insns asm.Instructions) (*ebpf.Program, error) {
	fn := &btf.Func{
		Name:    name,
		Linkage: btf.GlobalFunc,
		Type: &btf.FuncProto{
			Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed},
			Params: []btf.FuncParam{{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}},
		},
	}
	insns = append(asm.Instructions(nil), insns...)
	insns[0] = btf.WithFuncMetadata(insns[0].WithSymbol(name), fn)
	return ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "MIT", Instructions: insns})
}
