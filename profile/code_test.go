package profile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bpfperf/bpfperf/profile/kfilter"
)

// Addresses of the BPF symbols in TestCodeLookup's kallsyms.
const (
	knownProg  = 0xffffffffa0000000 // a program the symbolizer learned: 0x100 long
	trampoline = 0xffffffffa0010000 // a trampoline kallsyms lists
	newCode    = 0xffffffffa0004000 // a trampoline made after kallsyms was read
)

// TestCodeLookup (kallsyms is a fixture: the lookup rules are arithmetic
// over it): an address past a learned program's end is not that program's
// though kallsyms' nearest symbol is; a trampoline kallsyms lists holds a
// page at most; code a ksymbol record told of (AddCode) is named from it,
// exactly, goes to the kernel filter, and is forgotten as it is freed.
// Before AddCode and these rules, a trampoline made since kallsyms was
// read took the learned program's name below it.
func TestCodeLookup(t *testing.T) {
	dir := t.TempDir()
	kallsyms := "ffffffff81000000 T _stext\n" +
		"ffffffff81100000 T _etext\n" +
		"ffffffffa0000000 t bpf_prog_1111111111111111_known\t[bpf]\n" +
		"ffffffffa0010000 t bpf_trampoline_6442450999\t[bpf]\n"
	if err := os.WriteFile(filepath.Join(dir, "kallsyms"), []byte(kallsyms), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewSymbolizer(SymbolizerConfig{ProcRoot: dir})
	p := &program{id: 7, name: "known", tag: "1111111111111111"}
	p.funcs = []*function{{prog: p, start: knownProg, end: knownProg + 0x100, name: "known", systemName: "bpf_prog_1111111111111111_known"}}
	s.add(p)

	for _, c := range []struct {
		addr uint64
		want string
	}{
		{knownProg + 0x10, "known"},                      // learned
		{knownProg + 0x800, ""},                          // past its end: not it
		{newCode + 8, ""},                                // not told of yet
		{trampoline + 0x10, "bpf_trampoline_6442450999"}, // kallsyms, within a page
		{trampoline + 0x2000, ""},                        // past a page
	} {
		if got := s.Lookup(c.addr, 0).Func; got != c.want {
			t.Errorf("%#x: %q, want %q", c.addr, got, c.want)
		}
	}

	s.AddCode(newCode, 0x1000, "bpf_trampoline_42")
	fr := s.Lookup(newCode+8, 0)
	if fr.Func != "bpf_trampoline_42" || !fr.BPF() || fr.ProgID != 0 || fr.ProgTag != "" {
		t.Errorf("after AddCode: %+v, want bpf_trampoline_42, BPF code of no program", fr)
	}
	rs, _, err := s.codeRanges()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rs, kfilter.Range{Start: newCode, End: newCode + 0x1000}) {
		t.Errorf("the filter's ranges %x lack the new trampoline's", rs)
	}
	if fresh, _, ok := s.rangesSince(0); !ok || !slices.Contains(fresh, kfilter.Range{Start: newCode, End: newCode + 0x1000}) {
		t.Errorf("ranges learned since the start %x lack the new trampoline's", fresh)
	}
	s.RemoveCode(newCode)
	if got := s.Lookup(newCode+8, 0).Func; got != "" {
		t.Errorf("after RemoveCode: %q, want no name", got)
	}
}
