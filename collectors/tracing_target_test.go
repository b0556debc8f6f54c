package collectors

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestTracingTargets: Links names a tracing link's target as the function
// it traces ("fentry __do_sys_getppid", "fexit ..."), or the program
// ("fentry prog N"), where the kernel gives only ids; bpftool's ids for
// the same links are those of that function in the kernel's BTF, and of
// that program.
func TestTracingTargets(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry/fexit: runs in the VM (TestTracingInVM)")
	}
	privtest.Root(t)
	fentry := privtest.GetppidFentry(t, "tt_fentry")
	fexit, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "tt_fexit", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFExit, AttachTo: privtest.GetppidBody, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fexit.Close()
	lx, err := link.AttachTracing(link.TracingOptions{Program: fexit})
	if err != nil {
		t.Fatal(err)
	}
	defer lx.Close()
	target, err := privtest.LoadMix("tt_target", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	onProg, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "tt_onprog", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTarget: target, AttachTo: "tt_target", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer onProg.Close()
	lp, err := link.AttachTracing(link.TracingOptions{Program: onProg})
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()

	bodyID := privtest.KernelFuncID(t, privtest.GetppidBody)
	targetID := progID(t, target)

	byProg, err := Links()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prog      *ebpf.Program
		want      string
		obj       uint32 // 0: the kernel's BTF object, whatever its id
		btfID     uint32
		attachTyp string // bpftool's
	}{
		{fentry, "fentry " + privtest.GetppidBody, 0, bodyID, "trace_fentry"},
		{fexit, "fexit " + privtest.GetppidBody, 0, bodyID, "trace_fexit"},
		{onProg, "fentry prog " + itoa(targetID), targetID, 0, "trace_fentry"},
	} {
		id := progID(t, c.prog)
		got := byProg[id]
		if len(got) != 1 || got[0].Type != "tracing" || got[0].Target != c.want {
			t.Errorf("attach points of %d = %+v, want one tracing link on %q", id, got, c.want)
			continue
		}
		obj, typ := privtest.TracingLinkTarget(t, got[0].LinkID)
		var bt struct {
			ProgID     uint32 `json:"prog_id"`
			AttachType string `json:"attach_type"`
		}
		bpftool(t, &bt, "link", "show", "id", itoa(got[0].LinkID))
		t.Logf("%q: the kernel's target obj %d type %d; bpftool %+v", got[0].Target, obj, typ, bt)
		if (c.obj != 0 && obj != c.obj) || (c.btfID != 0 && typ != c.btfID) {
			t.Errorf("link %d: the kernel says obj %d type %d; we say %q (%s is BTF type %d)", got[0].LinkID, obj, typ, got[0].Target, privtest.GetppidBody, bodyID)
		}
		if bt.ProgID != id || bt.AttachType != c.attachTyp {
			t.Errorf("bpftool says link %d is %+v, want program %d %s", got[0].LinkID, bt, id, c.attachTyp)
		}
	}
}
