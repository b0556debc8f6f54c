package profile

import (
	"slices"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestPruneForgetsGonePrograms: Prune forgets a program at the second
// window it is not loaded, from the caller's list where it gives one
// (SymbolizerConfig.Loaded: the daemon's sweep), and from the kernel's
// program ids where it cannot say.
func TestPruneForgetsGonePrograms(t *testing.T) {
	privtest.Root(t)
	var a, b hotObjects
	if err := loadHotObjects(&a, nil); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := loadHotObjects(&b, nil); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	idA, _ := progID(t, a.HotEntry)
	idB, _ := progID(t, b.HotEntry)

	var listed []uint32
	known := false
	sym := NewSymbolizer(SymbolizerConfig{Loaded: func() ([]uint32, bool) { return listed, known }})
	for _, id := range []uint32{idA, idB} {
		if err := sym.Learn(id); err != nil {
			t.Fatal(err)
		}
	}
	prune := func(want ...uint32) {
		t.Helper()
		if _, err := sym.Prune(); err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint32{idA, idB} {
			if got, w := slices.Contains(sym.Programs(), id), slices.Contains(want, id); got != w {
				t.Fatalf("after Prune (caller's list %v, known %v): program %d known %v, want %v", listed, known, id, got, w)
			}
		}
	}

	// The caller says A is loaded after it went: the list is what counts.
	a.Close()
	listed, known = []uint32{idA, idB}, true
	prune(idA, idB)
	prune(idA, idB)
	// The caller lists neither: the first miss keeps them, the second
	// forgets them.
	listed = nil
	prune(idA, idB)
	b.Close()
	// The caller cannot say: the kernel's ids, where A and B are gone.
	known = false
	prune()
}
