package profile

import (
	"cmp"
	"slices"
	"strings"

	"github.com/bpfperf/bpfperf/profile/kfilter"
)

// codeSym is BPF JIT code that belongs to no program: a trampoline
// ("bpf_trampoline_<key>") or a dispatcher ("bpf_dispatcher_<name>").
type codeSym struct {
	start, end uint64
	name       string
}

// AddCode learns BPF JIT code of no program as the kernel registers it
// (a PERF_RECORD_KSYMBOL, collectors/loadrec): a trampoline made when a
// tracing program is attached is named from its first sample on, and the
// kernel filter passes it, where kallsyms, read again at most once a
// minute (reloadForTrampolines), would name it only then, and meanwhile
// a lookup would give the BPF symbol below it.
func (s *Symbolizer) AddCode(addr uint64, size uint32, name string) {
	if size == 0 {
		return
	}
	c := codeSym{start: addr, end: addr + uint64(size), name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, found := s.codeIndexLocked(addr); found {
		s.code[i] = c
	} else {
		s.code = slices.Insert(s.code, i, c)
	}
	s.learnedLocked([]kfilter.Range{{Start: c.start, End: c.end}})
}

// codeIndexLocked is where code starting at addr is, or would go, in
// s.code. Called with s.mu held.
func (s *Symbolizer) codeIndexLocked(addr uint64) (int, bool) {
	return slices.BinarySearchFunc(s.code, addr, func(c codeSym, a uint64) int { return cmp.Compare(c.start, a) })
}

// RemoveCode forgets the code AddCode learned at addr, as the kernel
// frees it. The filter keeps passing its range until its ranges are next
// set: a page that no sample will land in.
func (s *Symbolizer) RemoveCode(addr uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, found := s.codeIndexLocked(addr); found {
		s.code = slices.Delete(s.code, i, i+1)
	}
}

// codeAt returns the code AddCode learned that holds addr.
func (s *Symbolizer) codeAt(addr uint64) (codeSym, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, _ := s.codeIndexLocked(addr + 1)
	if i > 0 && addr < s.code[i-1].end {
		return s.code[i-1], true
	}
	return codeSym{}, false
}

// codeRangesLocked are the ranges of the code AddCode learned. Called
// with s.mu held.
func (s *Symbolizer) codeRangesLocked() []kfilter.Range {
	rs := make([]kfilter.Range, 0, len(s.code))
	for _, c := range s.code {
		rs = append(rs, kfilter.Range{Start: c.start, End: c.end})
	}
	return rs
}

// kallsymsLookup is ks.lookup with what the symbolizer knows of BPF code
// better than kallsyms, which has no sizes: a BPF symbol is taken to hold
// an address at most a page past it where it is a trampoline or
// dispatcher (they take a page at most), and not at all where it is a
// program the symbolizer learned, whose every function's end it knows
// (the address would have been found in it). Without this, code made
// since kallsyms was read (a trampoline just attached) took the name of
// the BPF symbol below it: its samples were charged to another program
// (TestRealToolsTrampolineVfsstat after other tests in one VM: no sample
// in vfs_read's trampoline in 17 windows).
func (s *Symbolizer) kallsymsLookup(ks *kallsyms, addr uint64) (name, mod string, start uint64, ok bool) {
	name, mod, start, ok = ks.lookup(addr)
	if !ok || mod != "bpf" {
		return name, mod, start, ok
	}
	if !strings.HasPrefix(name, "bpf_prog_") {
		return name, mod, start, addr-start < bpfSymbolReach
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, found := slices.BinarySearchFunc(s.index, start, func(f *function, a uint64) int { return cmp.Compare(f.start, a) })
	return name, mod, start, !found
}
