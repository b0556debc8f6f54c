package privtest

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/bpfperf/bpfperf/internal/btfprog"
)

// MixSlowLen is the packet length from which a mix program takes its slow
// path; FastPacket and SlowPacket are inputs for each path (a socket
// filter's test run drops the 14-byte Ethernet header from skb->len).
const MixSlowLen = 64

var (
	FastPacket = make([]byte, 14)
	SlowPacket = make([]byte, 200)
)

// LoadMix loads a socket filter named name, with BTF (which fentry needs),
// whose run time depends on its input: it spins slow turns for a packet
// of MixSlowLen bytes or more after the Ethernet header, fast turns for a
// shorter one.
func LoadMix(name string, fast, slow int32) (*ebpf.Program, error) {
	return btfprog.Load(name, asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // __sk_buff.len
		asm.Mov.Imm(asm.R1, fast),
		asm.JLT.Imm(asm.R2, MixSlowLen, "loop"),
		asm.Mov.Imm(asm.R1, slow),
		asm.Sub.Imm(asm.R1, 1).WithSymbol("loop"),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	})
}

// RunMix runs prog n times, every every-th run on SlowPacket.
func RunMix(prog *ebpf.Program, n, every int) error {
	for i := range n {
		in := FastPacket
		if i%every == every-1 {
			in = SlowPacket
		}
		if _, err := prog.Run(&ebpf.RunOptions{Data: in, Repeat: 1}); err != nil {
			return err
		}
	}
	return nil
}
