// Package kernelbtf names kernel and module functions by their BTF ids,
// which is all the kernel gives for where a tracing program (fentry,
// fexit, fmod_ret, lsm) is attached: in its link's info and in its
// trampoline's kallsyms name. The kernel's BTF is read once, only where
// such a program exists (cilium/ebpf caches it and decodes it lazily:
// 1.5 MiB and 22 ms on 6.18), and each answer is kept.
package kernelbtf

import (
	"sync"

	"github.com/cilium/ebpf/btf"
)

// maxNames bounds the answers kept: a host has a few hundred traced
// functions at most; past this many the cache starts again.
const maxNames = 4096

type key struct{ obj, typ uint32 }

type answer struct {
	fn     string
	kernel bool
}

var names = struct {
	sync.Mutex
	m map[key]answer
}{m: map[key]answer{}}

// FuncName names function typ of BTF object obj. kernel is true if obj is
// the kernel's or a module's BTF object, fn "" where typ is no function
// there or its BTF cannot be read. An object that is not loaded (a module
// gone) answers false and is not kept.
func FuncName(obj, typ uint32) (fn string, kernel bool) {
	k := key{obj, typ}
	names.Lock()
	a, ok := names.m[k]
	names.Unlock()
	if ok {
		return a.fn, a.kernel
	}
	a, keep := lookup(obj, typ)
	if keep {
		names.Lock()
		if len(names.m) >= maxNames {
			clear(names.m)
		}
		names.m[k] = a
		names.Unlock()
	}
	return a.fn, a.kernel
}

func lookup(obj, typ uint32) (a answer, keep bool) {
	h, err := btf.NewHandleFromID(btf.ID(obj))
	if err != nil {
		return answer{}, false
	}
	defer h.Close()
	hi, err := h.Info()
	if err != nil {
		return answer{}, false
	}
	if !hi.IsVmlinux() && !hi.IsModule() {
		return answer{}, true
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return answer{kernel: true}, false
	}
	if hi.IsModule() {
		if spec, err = h.Spec(spec); err != nil {
			return answer{kernel: true}, false
		}
	}
	t, err := spec.TypeByID(btf.TypeID(typ))
	if f, ok := t.(*btf.Func); err == nil && ok {
		return answer{fn: f.Name, kernel: true}, true
	}
	return answer{kernel: true}, true
}
