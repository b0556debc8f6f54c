package collectors

import (
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestFullNames: a program whose name the kernel cut is read under its
// BTF function's full name, as bpftool prints it; one whose name fits, or
// that has no BTF, under the kernel's.
func TestFullNames(t *testing.T) {
	privtest.Root(t)
	long := uniqueName("bpfperf_full_name_of_a_function")
	for _, c := range []struct {
		name, wantName, wantKernel string
		btf                        bool
	}{
		{long, long, long[:KernelNameLen], true},
		{"short_name", "short_name", "short_name", true},
		// Without BTF there is no other name: the kernel's stays.
		{long, long[:KernelNameLen], long[:KernelNameLen], false},
	} {
		var prog *ebpf.Program
		var err error
		insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
		if c.btf {
			prog, err = btfprog.Load(c.name, insns)
		} else {
			prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: c.name, Type: ebpf.SocketFilter, License: "MIT", Instructions: insns})
		}
		if err != nil {
			t.Fatal(err)
		}
		id := progID(t, prog)
		m, err := ReadMeta(id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != c.wantName || m.KernelName != c.wantKernel {
			t.Errorf("%s (btf %v): name %q, kernel name %q; want %q, %q", c.name, c.btf, m.Name, m.KernelName, c.wantName, c.wantKernel)
		}
		var bt struct{ Name string }
		bpftool(t, &bt, "prog", "show", "id", strconv.FormatUint(uint64(id), 10))
		if bt.Name != m.Name {
			t.Errorf("%s (btf %v): name %q, bpftool %q", c.name, c.btf, m.Name, bt.Name)
		}
		prog.Close()
	}
}

// BenchmarkReadMeta is what reading a new program's metadata costs, with
// the BTF lookup of a full name (a cut name) and without (a name that
// fits): the price of full names, paid once per program.
func BenchmarkReadMeta(b *testing.B) {
	privtest.Root(b)
	insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	for _, c := range []struct{ what, name string }{{"cut-name", uniqueName("bpfperf_full_name_of_a_function")}, {"short-name", "short_name"}} {
		prog, err := btfprog.Load(c.name, insns)
		if err != nil {
			b.Fatal(err)
		}
		id := progID(b, prog)
		b.Run(c.what, func(b *testing.B) {
			for b.Loop() {
				if _, err := ReadMeta(id); err != nil {
					b.Fatal(err)
				}
			}
		})
		prog.Close()
	}
}
