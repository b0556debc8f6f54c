package loadrec

import (
	"bytes"
	"encoding/binary"
	"strings"

	"golang.org/x/sys/unix"
)

// sampleType is what the kernel appends to every record (sample_id_all):
// the task's pid and tid, then the time. The kernel writes the fields in
// bit order, and puts them at the end of the record, after a ksymbol's
// name of any length, so they are read from the end.
const (
	sampleType   = unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME
	sampleIDSize = 16 // pid u32, tid u32, time u64
)

// record is one side-band record the follower acts on, copied out of its
// ring. Which fields are set depends on typ.
type record struct {
	typ  uint32 // unix.PERF_RECORD_*
	pid  uint32 // sample_id: the task that caused the record
	tid  uint32
	time uint64 // sample_id: CLOCK_MONOTONIC ns (use_clockid, see attr)

	// PERF_RECORD_BPF_EVENT (Linux 5.1)
	event  uint16 // unix.PERF_BPF_EVENT_PROG_LOAD or _UNLOAD
	progID uint32
	tag    [8]byte

	// PERF_RECORD_KSYMBOL (Linux 5.1)
	ksym       Ksym
	ksymType   uint16 // unix.PERF_RECORD_KSYMBOL_TYPE_*
	unregister bool

	// PERF_RECORD_LOST
	lost uint64
}

// parse decodes a record's data (after its 8-byte header). It returns
// false for types the follower does not read and for records too short to
// be what their type says.
func parse(typ uint32, data []byte) (record, bool) {
	ne := binary.NativeEndian
	r := record{typ: typ}
	if len(data) < sampleIDSize {
		return r, false
	}
	id := data[len(data)-sampleIDSize:]
	r.pid, r.tid, r.time = ne.Uint32(id), ne.Uint32(id[4:]), ne.Uint64(id[8:])
	body := data[:len(data)-sampleIDSize]
	switch typ {
	case unix.PERF_RECORD_BPF_EVENT:
		// u16 type, u16 flags, u32 id, u8 tag[8]
		if len(body) < 16 {
			return r, false
		}
		r.event, r.progID = ne.Uint16(body), ne.Uint32(body[4:])
		copy(r.tag[:], body[8:16])
	case unix.PERF_RECORD_KSYMBOL:
		// u64 addr, u32 len, u16 ksym_type, u16 flags, char name[] (NUL, padded to 8)
		if len(body) < 16 {
			return r, false
		}
		r.ksym.Addr, r.ksym.Len = ne.Uint64(body), ne.Uint32(body[8:])
		r.ksymType = ne.Uint16(body[12:])
		r.unregister = ne.Uint16(body[14:])&unix.PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER != 0
		name := body[16:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		r.ksym.Name = string(name)
	case unix.PERF_RECORD_LOST:
		// u64 id, u64 lost
		if len(body) < 16 {
			return r, false
		}
		r.lost = ne.Uint64(body[8:])
	default:
		return r, false
	}
	return r, true
}

// codeKsym reports whether r registers or unregisters BPF JIT code that
// belongs to no program load: a trampoline ("bpf_trampoline_<key>", made
// when a tracing program is attached) or a dispatcher
// ("bpf_dispatcher_<name>").
func (r *record) codeKsym() bool {
	return r.typ == unix.PERF_RECORD_KSYMBOL && r.ksymType == unix.PERF_RECORD_KSYMBOL_TYPE_BPF &&
		!strings.HasPrefix(r.ksym.Name, "bpf_prog_")
}

// progKsym reports whether r registers the JIT image of a program (its
// main function or a subprogram): "bpf_prog_<tag>_<name>". Trampolines
// and dispatchers ("bpf_trampoline_...", "bpf_dispatcher_...") are BPF
// ksymbols too, but belong to no program load.
func (r *record) progKsym() bool {
	return r.typ == unix.PERF_RECORD_KSYMBOL && r.ksymType == unix.PERF_RECORD_KSYMBOL_TYPE_BPF &&
		!r.unregister && strings.HasPrefix(r.ksym.Name, "bpf_prog_")
}
