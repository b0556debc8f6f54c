package kfilter

import (
	"errors"
	"os"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestMain(m *testing.M) { os.Exit(privtest.RunCheckingLeaks(m)) }

func load(t *testing.T) *Filter {
	t.Helper()
	privtest.Root(t)
	f, err := Load()
	if errors.Is(err, ErrNotSupported) {
		privtest.Skip(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSetRanges: the kernel map holds exactly the pages of the ranges
// given last, and those AddRanges added since; a set too big turns the
// filter into a pass-all, and a smaller one turns it back.
func TestSetRanges(t *testing.T) {
	f := load(t)
	if !Ours(f.id) {
		t.Error("the filter is not listed as ours")
	}
	kernelPages := func() map[uint64]bool {
		got := map[uint64]bool{}
		var k uint64
		var v uint8
		it := f.objs.Pages.Iterate()
		for it.Next(&k, &v) {
			got[k] = true
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := f.SetRanges([]Range{{0x1000, 0x3001}, {0x2800, 0x2900}, {0x9000, 0x9000}}); err != nil {
		t.Fatal(err)
	}
	if got := kernelPages(); len(got) != 3 || !got[1] || !got[2] || !got[3] {
		t.Errorf("pages %v, want 1 2 3", got)
	}
	if err := f.SetRanges([]Range{{0x3000, 0x5000}}); err != nil {
		t.Fatal(err)
	}
	if got := kernelPages(); len(got) != 2 || !got[3] || !got[4] {
		t.Errorf("pages %v, want 3 4", got)
	}
	if err := f.SetRanges([]Range{{0, (MaxPages + 1) << pageShift}}); err != nil {
		t.Fatal(err)
	}
	var all uint32
	if err := f.objs.Config.Lookup(uint32(0), &all); err != nil || all != 1 {
		t.Errorf("pass-all %d (%v) after too many pages", all, err)
	}
	if _, full := f.Pages(); !full {
		t.Error("Pages says not full")
	}
	if err := f.SetRanges([]Range{{0x3000, 0x4000}}); err != nil {
		t.Fatal(err)
	}
	if err := f.objs.Config.Lookup(uint32(0), &all); err != nil || all != 0 {
		t.Errorf("pass-all %d (%v) after a set that fits", all, err)
	}
	if n, full := f.Pages(); n != 1 || full {
		t.Errorf("Pages %d %v, want 1 false", n, full)
	}
	// AddRanges keeps what the map holds and adds the new pages.
	if err := f.AddRanges([]Range{{0x5000, 0x6001}, {0x3800, 0x3900}}); err != nil {
		t.Fatal(err)
	}
	if got := kernelPages(); len(got) != 3 || !got[3] || !got[5] || !got[6] {
		t.Errorf("pages %v after AddRanges, want 3 5 6", got)
	}
	if err := f.AddRanges([]Range{{0, (MaxPages + 1) << pageShift}}); err != nil {
		t.Fatal(err)
	}
	if err := f.objs.Config.Lookup(uint32(0), &all); err != nil || all != 1 {
		t.Errorf("pass-all %d (%v) after adding too many pages", all, err)
	}
	if err := f.SetRanges([]Range{{0x3000, 0x4000}}); err != nil {
		t.Fatal(err)
	}
	if got := kernelPages(); len(got) != 1 || !got[3] {
		t.Errorf("pages %v after SetRanges, want 3", got)
	}
	if c, err := f.Counts(); err != nil || c != (Counts{}) {
		t.Errorf("counts %+v (%v) with no event attached", c, err)
	}
}
