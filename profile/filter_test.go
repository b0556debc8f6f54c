package profile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/profile/kfilter"
)

// TestCodeRanges: the filter passes what Build keeps: learned functions
// exactly, kallsyms' BPF symbols (a trampoline to a page at most, a
// program not learned up to the next symbol) and the hook functions up
// to the next symbol; no other kernel or module code.
func TestCodeRanges(t *testing.T) {
	dir := t.TempDir()
	ks := `ffffffff81000000 T _stext
ffffffff81001000 T trace_call_bpf
ffffffff81001400 T bpf_trace_run2
ffffffff81001800 T other
ffffffff81002000 T syscall_trace_enter
ffffffff81002100 T sched_clock
ffffffff82000000 T _etext
ffffffffc0002000 t bpf_trampoline_6442450944	[bpf]
ffffffffc0100000 t bpf_prog_0123456789abcdef_x	[bpf]
ffffffffc0100800 t e1000_clean	[e1000]
`
	if err := os.WriteFile(filepath.Join(dir, "kallsyms"), []byte(ks), 0o644); err != nil {
		t.Fatal(err)
	}
	sym := NewSymbolizer(SymbolizerConfig{ProcRoot: dir, KallsymsMaxAge: time.Hour})
	p := &program{id: 7, name: "learned"}
	f := &function{prog: p, start: 0xffffffffc0200010, end: 0xffffffffc0200090}
	p.funcs = []*function{f}
	sym.progs[7], sym.index = p, []*function{f}
	got, _, err := sym.codeRanges()
	if err != nil {
		t.Fatal(err)
	}
	want := []kfilter.Range{
		{Start: 0xffffffff81001000, End: 0xffffffff81001400},
		{Start: 0xffffffff81001400, End: 0xffffffff81001800},
		{Start: 0xffffffff81002000, End: 0xffffffff81002100},
		{Start: 0xffffffffc0002000, End: 0xffffffffc0003000},
		{Start: 0xffffffffc0100000, End: 0xffffffffc0100800},
		{Start: 0xffffffffc0200010, End: 0xffffffffc0200090},
	}
	slices.SortFunc(got, func(a, b kfilter.Range) int { return int(int64(a.Start>>1) - int64(b.Start>>1)) })
	if !slices.Equal(got, want) {
		t.Errorf("ranges %x\nwant %x", got, want)
	}
}

// TestFilterMode: no filter asked for is "off"; one that failed says why.
func TestFilterMode(t *testing.T) {
	s := &Sampler{}
	if on, why := s.filterMode(); on || why != "off" {
		t.Errorf("no filter: %v %q", on, why)
	}
	s.filterErr = kfilter.ErrNotSupported
	if on, why := s.filterMode(); on || why != kfilter.ErrNotSupported.Error() {
		t.Errorf("refused: %v %q", on, why)
	}
}

// TestFilteredDrainInterval: filtered rings are drained about once a
// second at the default rate, and never later than three quarters of the
// time they take to fill with every sample passing.
func TestFilteredDrainInterval(t *testing.T) {
	if d := filteredDrainInterval(DefaultHz, defaultRingPages); d < 900*time.Millisecond || d > time.Second {
		t.Errorf("at %d Hz: %v", DefaultHz, d)
	}
	if d := filteredDrainInterval(MaxHz, defaultRingPages); d > 100*time.Millisecond || d <= drainInterval(MaxHz, defaultRingPages) {
		t.Errorf("at %d Hz: %v (unfiltered %v)", MaxHz, d, drainInterval(MaxHz, defaultRingPages))
	}
}

// TestRangesSince: a filtered capture adds the code of programs learned
// since its filter's generation, exactly; once the log no longer reaches
// back that far it is told to take every range again.
func TestRangesSince(t *testing.T) {
	sym := NewSymbolizer(SymbolizerConfig{})
	prog := func(id uint32, starts ...uint64) *program {
		p := &program{id: id, name: "p"}
		for _, a := range starts {
			p.funcs = append(p.funcs, &function{prog: p, start: a, end: a + 0x40})
		}
		return p
	}
	sym.add(prog(1, 0x1000))
	g1, _ := sym.changes()
	sym.add(prog(2, 0x5000, 0x5100))
	sym.add(prog(2, 0x9000)) // known: nothing new
	rs, g2, ok := sym.rangesSince(g1)
	if want := []kfilter.Range{{Start: 0x5000, End: 0x5040}, {Start: 0x5100, End: 0x5140}}; !ok || g2 != g1+1 || !slices.Equal(rs, want) {
		t.Errorf("since %d: %x %d %v, want %x %d", g1, rs, g2, ok, want, g1+1)
	}
	if rs, _, ok := sym.rangesSince(0); !ok || len(rs) != 3 {
		t.Errorf("since 0: %x %v, want 3 ranges", rs, ok)
	}
	if rs, g, ok := sym.rangesSince(g2); !ok || len(rs) != 0 || g != g2 {
		t.Errorf("since now: %x %d %v", rs, g, ok)
	}
	big := make([]uint64, maxFresh)
	for i := range big {
		big[i] = 0x100000 + uint64(i)<<8
	}
	sym.add(prog(3, big...))
	if _, _, ok := sym.rangesSince(g2); ok {
		t.Error("a log cut short still answered for an older generation")
	}
}
