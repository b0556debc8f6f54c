package collectors

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf/btf"
)

// KernelNameLen is the longest name the kernel keeps for a program
// (BPF_OBJ_NAME_LEN less its NUL). A name this long was probably cut.
const KernelNameLen = 15

// funcInfoRec is one record of bpf_prog_info.func_info: where a function
// starts and its BTF type.
type funcInfoRec struct {
	insnOff uint32
	typeID  uint32
}

// fullName is a program's full name, as bpftool prints it: where the
// kernel's name has the full 15 characters (so it may have been cut) and
// the program carries BTF, the name of the BTF function of its first
// func_info record, which is the program's entry function; else the
// kernel's name. Failing that lookup only costs the full name, so it
// returns the kernel's name rather than an error.
func fullName(fd int, kernelName string, btfID, nrFuncInfo uint32) string {
	if len(kernelName) != KernelNameLen || btfID == 0 || nrFuncInfo == 0 {
		return kernelName
	}
	// On the heap, which does not move, since the kernel writes through
	// an address held as a plain integer.
	rec := new(funcInfoRec)
	info := progInfo{nrFuncInfo: 1, funcInfoRecSize: uint32(unsafe.Sizeof(*rec)), funcInfo: uint64(uintptr(unsafe.Pointer(rec)))}
	err := objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info)))
	runtime.KeepAlive(rec)
	if err != nil {
		return kernelName
	}
	name, err := btfFuncName(btfID, rec.typeID)
	if err != nil || name == "" {
		return kernelName
	}
	return name
}

// btfFuncName is the name of type typeID in the BTF object btfID.
func btfFuncName(btfID, typeID uint32) (string, error) {
	h, err := btf.NewHandleFromID(btf.ID(btfID))
	if err != nil {
		return "", fmt.Errorf("open btf %d: %w", btfID, err)
	}
	defer h.Close()
	// A program's BTF stands alone (only kernel modules' BTF is split off
	// vmlinux), so no base is needed.
	spec, err := h.Spec(nil)
	if err != nil {
		return "", fmt.Errorf("read btf %d: %w", btfID, err)
	}
	t, err := spec.TypeByID(btf.TypeID(typeID))
	if err != nil {
		return "", fmt.Errorf("btf %d type %d: %w", btfID, typeID, err)
	}
	fn, ok := t.(*btf.Func)
	if !ok {
		return "", fmt.Errorf("btf %d type %d is a %T, not a function", btfID, typeID, t)
	}
	return fn.Name, nil
}
