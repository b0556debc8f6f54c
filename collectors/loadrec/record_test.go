package loadrec

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// sampleID is what sample_id_all appends: pid, tid, time.
func sampleID(pid, tid uint32, time uint64) []byte {
	b := make([]byte, sampleIDSize)
	binary.NativeEndian.PutUint32(b, pid)
	binary.NativeEndian.PutUint32(b[4:], tid)
	binary.NativeEndian.PutUint64(b[8:], time)
	return b
}

func bpfEvent(event uint16, id uint32, tag [8]byte, pid, tid uint32, time uint64) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint16(b, event)
	binary.NativeEndian.PutUint32(b[4:], id)
	copy(b[8:], tag[:])
	return append(b, sampleID(pid, tid, time)...)
}

func ksymbol(addr uint64, n uint32, typ, flags uint16, name string, pid, tid uint32, time uint64) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint64(b, addr)
	binary.NativeEndian.PutUint32(b[8:], n)
	binary.NativeEndian.PutUint16(b[12:], typ)
	binary.NativeEndian.PutUint16(b[14:], flags)
	b = append(b, name...)
	b = append(b, make([]byte, 8-len(name)%8)...) // NUL, padded to 8
	return append(b, sampleID(pid, tid, time)...)
}

func TestParse(t *testing.T) {
	tag := [8]byte{0x59, 0xf4, 0xa9, 0x31, 0x74, 0x4d, 0xcd, 0xc6}
	r, ok := parse(unix.PERF_RECORD_BPF_EVENT, bpfEvent(unix.PERF_BPF_EVENT_PROG_LOAD, 137, tag, 10, 11, 12345), true)
	if !ok || r.event != unix.PERF_BPF_EVENT_PROG_LOAD || r.progID != 137 || r.tag != tag ||
		r.pid != 10 || r.tid != 11 || r.time != 12345 {
		t.Errorf("bpf event: %+v, %v", r, ok)
	}

	for _, name := range []string{"bpf_prog_59f4a931744dcdc6_x", "bpf_prog_59f4a931744dcdc6_loadrec_t"} { // 8n+3 and 8n chars
		r, ok = parse(unix.PERF_RECORD_KSYMBOL, ksymbol(0xffffffffc0025508, 43, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, 0, name, 10, 11, 99), true)
		if !ok || r.ksym != (Ksym{Addr: 0xffffffffc0025508, Len: 43, Name: name}) || r.unregister || !r.progKsym() ||
			r.tid != 11 || r.time != 99 {
			t.Errorf("ksymbol %s: %+v, %v", name, r, ok)
		}
	}
	r, _ = parse(unix.PERF_RECORD_KSYMBOL, ksymbol(1, 2, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, unix.PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER, "bpf_prog_0_a", 1, 1, 1), true)
	if !r.unregister || r.progKsym() {
		t.Errorf("unregistering ksymbol: %+v", r)
	}
	r, _ = parse(unix.PERF_RECORD_KSYMBOL, ksymbol(1, 2, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, 0, "bpf_trampoline_6442", 1, 1, 1), true)
	if r.progKsym() {
		t.Errorf("a trampoline taken for a program's image: %+v", r)
	}

	lost := make([]byte, 16)
	binary.NativeEndian.PutUint64(lost[8:], 7)
	r, ok = parse(unix.PERF_RECORD_LOST, append(lost, sampleID(0, 0, 5)...), true)
	if !ok || r.lost != 7 {
		t.Errorf("lost: %+v, %v", r, ok)
	}

	// Beside other followers the kernel leaves 16 or 32 bytes unwritten
	// after the sample_id (see sampleType): an earlier record's.
	stale := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	for _, extra := range []int{16, 32} {
		r, ok = parse(unix.PERF_RECORD_BPF_EVENT, append(bpfEvent(unix.PERF_BPF_EVENT_PROG_LOAD, 137, tag, 10, 11, 12345), stale[:extra]...), true)
		if !ok || r.progID != 137 || r.pid != 10 || r.tid != 11 || r.time != 12345 {
			t.Errorf("bpf event and %d bytes more: %+v, %v", extra, r, ok)
		}
		name := "bpf_prog_59f4a931744dcdc6_x"
		r, ok = parse(unix.PERF_RECORD_KSYMBOL, append(ksymbol(0xffffffffc0025508, 43, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, 0, name, 10, 11, 99), stale[:extra]...), true)
		if !ok || r.ksym.Name != name || r.pid != 10 || r.tid != 11 || r.time != 99 {
			t.Errorf("ksymbol and %d bytes more: %+v, %v", extra, r, ok)
		}
	}

	// Without a sample_id asked for, the body alone, and whatever other
	// readers' sample_ids grew the record by after it.
	body := bpfEvent(unix.PERF_BPF_EVENT_PROG_LOAD, 137, tag, 10, 11, 12345)[:16]
	for _, extra := range []int{0, 16, 32} {
		r, ok = parse(unix.PERF_RECORD_BPF_EVENT, append(slices.Clone(body), stale[:extra]...), false)
		if !ok || r.progID != 137 || r.tag != tag || r.pid != 0 || r.time != 0 {
			t.Errorf("bpf event without a sample_id, and %d bytes more: %+v, %v", extra, r, ok)
		}
	}
	if _, ok := parse(unix.PERF_RECORD_BPF_EVENT, body[:15], false); ok {
		t.Error("a bpf event of 15 bytes parsed")
	}

	// Too short for what the type says, or a type not read: skipped.
	for _, c := range []struct {
		typ  uint32
		data []byte
	}{
		{unix.PERF_RECORD_BPF_EVENT, make([]byte, 31)},
		{unix.PERF_RECORD_KSYMBOL, make([]byte, 31)},
		{unix.PERF_RECORD_KSYMBOL, append(make([]byte, 16), "bpf_prog_x"...)},            // no NUL
		{unix.PERF_RECORD_KSYMBOL, ksymbol(1, 2, 1, 0, "bpf_prog_x", 1, 1, 1)[:16+16+8]}, // no room for the sample_id
		{unix.PERF_RECORD_LOST, make([]byte, 31)},
		{unix.PERF_RECORD_BPF_EVENT, nil},
		{unix.PERF_RECORD_COMM, make([]byte, 64)},
	} {
		if _, ok := parse(c.typ, c.data, true); ok {
			t.Errorf("type %d, %d bytes: parsed", c.typ, len(c.data))
		}
	}
}

// A load takes its thread's ksymbols from its main function's on (its
// subprograms have tags of their own); those before were left by a load
// whose record was lost, and another thread's are not its.
func TestClaimKsyms(t *testing.T) {
	f := &Follower{ksyms: map[uint32][]record{}, withID: true}
	ks := func(tid uint32, name string) {
		r, _ := parse(unix.PERF_RECORD_KSYMBOL, ksymbol(0, 1, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, 0, name, 1, tid, 1), true)
		f.act(&r, 0)
	}
	ks(5, "bpf_prog_1111111111111111_stale")
	ks(6, "bpf_prog_aaaaaaaaaaaaaaaa_other")
	ks(5, "bpf_prog_e940a2757a1ee80a_with_sub")
	ks(5, "bpf_prog_e2fcf263a932412b_helper")
	var names []string
	for _, k := range f.claimKsyms(5, "e940a2757a1ee80a") {
		names = append(names, k.Name)
	}
	if want := []string{"bpf_prog_e940a2757a1ee80a_with_sub", "bpf_prog_e2fcf263a932412b_helper"}; !slices.Equal(names, want) {
		t.Errorf("claimed %q, want %q", names, want)
	}
	if _, ok := f.ksyms[5]; ok {
		t.Error("thread 5's ksymbols left after its load")
	}
	if len(f.ksyms[6]) != 1 {
		t.Error("thread 6's ksymbol taken by thread 5's load")
	}
	if k := f.claimKsyms(6, "bbbbbbbbbbbbbbbb"); k != nil {
		t.Errorf("ksymbols of another program claimed: %v", k)
	}
}

// Held records go out in time order, and only once older than hold: an
// unload read from one CPU's ring before its load from another's still
// follows it.
func TestDeliverInTimeOrder(t *testing.T) {
	var got []string
	f := &Follower{ksyms: map[uint32][]record{}, withID: true, cfg: Config{
		OnLoad:   func(l Load) { got = append(got, "load "+l.Tag) },
		OnUnload: func(u Unload) { got = append(got, "unload "+u.Tag) },
	}, join: joiner{procRoot: t.TempDir()}}
	now := monoNow()
	tag := func(b byte) [8]byte { return [8]byte{b} }
	for _, data := range [][]byte{
		bpfEvent(unix.PERF_BPF_EVENT_PROG_UNLOAD, 1, tag(1), 0, 0, now-2*uint64(hold)),
		bpfEvent(unix.PERF_BPF_EVENT_PROG_LOAD, 2, tag(2), 0, 0, now+uint64(hold)), // too fresh
		bpfEvent(unix.PERF_BPF_EVENT_PROG_LOAD, 1, tag(1), 0, 0, now-3*uint64(hold)),
	} {
		r, _ := parse(unix.PERF_RECORD_BPF_EVENT, data, true)
		f.take(r)
	}
	f.deliver()
	if want := []string{"load 0100000000000000", "unload 0100000000000000"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if len(f.held) != 1 || f.held[0].progID != 2 {
		t.Errorf("held %+v, want program 2's load", f.held)
	}
}

// Without a sample_id, records read in one pass share its time: a
// program's load read from one CPU's ring goes before its unload read
// from another's first, and ksymbols go to the load read after them in
// their own CPU's ring.
func TestDeliverWithoutIDs(t *testing.T) {
	var got []string
	var ksyms []Ksym
	f := &Follower{ksyms: map[uint32][]record{}, cfg: Config{
		OnLoad: func(l Load) {
			got = append(got, "load "+l.Tag)
			ksyms = append(ksyms, l.Ksyms...)
		},
		OnUnload: func(u Unload) { got = append(got, "unload "+u.Tag) },
	}, join: joiner{procRoot: t.TempDir()}}
	f.readAt = monoNow() - 2*uint64(hold)
	read := func(cpu int, typ uint32, data []byte) {
		r, ok := parse(typ, data, false)
		if !ok {
			t.Fatalf("%d bytes of type %d not parsed", len(data), typ)
		}
		r.cpu = cpu
		f.take(r)
	}
	tag := [8]byte{0xe9, 0x40, 0xa2, 0x75, 0x7a, 0x1e, 0xe8, 0x0a}
	read(0, unix.PERF_RECORD_BPF_EVENT, bpfEvent(unix.PERF_BPF_EVENT_PROG_UNLOAD, 1, tag, 0, 0, 0)[:16])
	read(0, unix.PERF_RECORD_KSYMBOL, ksymbol(1, 2, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, 0, "bpf_prog_aaaaaaaaaaaaaaaa_cpu0", 0, 0, 0)[:16+32])
	read(1, unix.PERF_RECORD_KSYMBOL, ksymbol(3, 4, unix.PERF_RECORD_KSYMBOL_TYPE_BPF, 0, "bpf_prog_e940a2757a1ee80a_cpu1", 0, 0, 0)[:16+32])
	read(1, unix.PERF_RECORD_BPF_EVENT, bpfEvent(unix.PERF_BPF_EVENT_PROG_LOAD, 1, tag, 0, 0, 0)[:16])
	f.deliver()
	if want := []string{"load e940a2757a1ee80a", "unload e940a2757a1ee80a"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if len(ksyms) != 1 || ksyms[0].Name != "bpf_prog_e940a2757a1ee80a_cpu1" {
		t.Errorf("the load took ksymbols %+v, want its own CPU's", ksyms)
	}
}
