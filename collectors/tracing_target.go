package collectors

import (
	"fmt"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/kernelbtf"
)

// A tracing link (fentry, fexit, fmod_ret, lsm, freplace) tells its target
// as the trampoline's key: a BTF object id and a type id in it for a
// kernel or module function, or a program id and a type id in that
// program's BTF for a program. Its AttachPoint names it as bpftool's
// users would want it: "fentry tcp_sendmsg", "fexit prog 42", with
// "btf obj O type T" only where the name cannot be read.

// tracingKinds name a tracing link's attach type (enum bpf_attach_type);
// freplace programs have none.
var tracingKinds = map[uint32]string{0: "freplace", 23: "tp_btf", 24: "fentry", 25: "fexit", 26: "fmod_ret", 27: "lsm"}

// tracingTargets caches each tracing link's target by link id: a link's
// target never changes, and naming it reads BTF. Links prunes it to the
// links of its latest walk.
var tracingTargets = struct {
	sync.Mutex
	byLink map[uint32]string
}{byLink: map[uint32]string{}}

// tracingTarget names the target of tracing link linkID, of program
// progID, attached with attachType at (obj, typ).
func tracingTarget(linkID, progID, attachType, obj, typ uint32) string {
	tracingTargets.Lock()
	defer tracingTargets.Unlock()
	if t, ok := tracingTargets.byLink[linkID]; ok {
		return t
	}
	kind, ok := tracingKinds[attachType]
	if !ok {
		kind = "attach_type " + strconv.FormatUint(uint64(attachType), 10)
	}
	t := kind
	if obj != 0 {
		t = kind + " " + tracingFunc(progID, obj, typ)
	}
	tracingTargets.byLink[linkID] = t
	return t
}

// pruneTracingTargets forgets the links not in seen.
func pruneTracingTargets(seen map[uint32]bool) {
	tracingTargets.Lock()
	defer tracingTargets.Unlock()
	for id := range tracingTargets.byLink {
		if !seen[id] {
			delete(tracingTargets.byLink, id)
		}
	}
}

// tracingFunc names the function at (obj, typ). The key does not say
// whether obj is a BTF object or a program (ids of two kinds): obj is
// taken as the kernel's or a module's BTF where a BTF object of that id
// is one, and the program's attach_btf_obj_id (Linux 6.0) agrees where
// the kernel has it (a program loaded for a kernel function names that
// object there; one loaded for a program names the program's BTF), and
// as a program otherwise.
func tracingFunc(progID, obj, typ uint32) string {
	fn, kernel := kernelbtf.FuncName(obj, typ)
	if attachObj, known := attachBTFObj(progID); kernel && (!known || attachObj == obj) {
		if fn == "" {
			return fmt.Sprintf("btf obj %d type %d", obj, typ)
		}
		return fn
	}
	return fmt.Sprintf("prog %d", obj)
}

// attachBTFObj reads program id's attach_btf_obj_id, known false where
// the kernel has none (before 6.0) or the program is gone.
func attachBTFObj(id uint32) (obj uint32, known bool) {
	fd, err := fdByID(unix.BPF_PROG_GET_FD_BY_ID, id)
	if err != nil {
		return 0, false
	}
	defer closeFD(fd)
	var info progInfo
	if err := objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info))); err != nil {
		return 0, false
	}
	return info.attachBTFObjID, info.attachBTFObjID != 0
}
