package loadrec

import (
	"bytes"
	"encoding/binary"
	"strings"

	"golang.org/x/sys/unix"
)

// sampleType is what the kernel appends to every record when the
// follower asks for it (sample_id_all, only where the tracepoints that
// say who loaded a program could not be attached): the task's pid and
// tid, then the time, in bit order.
//
// The sample_id is read where the kernel wrote it, right after the body,
// never from the record's end: with more than one event asking for these
// records on a CPU (a second daemon, `perf record`), the kernel grows the
// shared record's size by each event's sample_id as it writes to them in
// turn and never puts it back (perf_event_bpf_output and
// perf_event_ksymbol_output in kernel/events/core.c, as of 6.18). The
// second event's records end in 16 bytes never written, the third's in 32:
// zeros in a fresh ring, an earlier record's bytes after it wrapped. The
// same fault is why the follower does not ask where it need not: its own
// sample_id pads the records of every reader started before it.
const (
	sampleType   = unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME
	sampleIDSize = 16 // pid u32, tid u32, time u64
)

// record is one side-band record the follower acts on, copied out of its
// ring. Which fields are set depends on typ.
type record struct {
	typ uint32 // unix.PERF_RECORD_*
	cpu int    // the ring it was read from
	pid uint32 // sample_id: the task that caused the record (0 without)
	tid uint32
	// time is CLOCK_MONOTONIC ns: the sample_id's (use_clockid, see attr),
	// or, without one, when the follower read it.
	time uint64

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

// parse decodes a record's data (after its 8-byte header), with a
// sample_id after the body where withID. It returns false for types the
// follower does not read and for records too short to be what their type
// says.
func parse(typ uint32, data []byte, withID bool) (record, bool) {
	ne := binary.NativeEndian
	r := record{typ: typ}
	var body int // the body's length: where the sample_id starts
	switch typ {
	case unix.PERF_RECORD_BPF_EVENT:
		// u16 type, u16 flags, u32 id, u8 tag[8]
		if body = 16; len(data) < body {
			return r, false
		}
		r.event, r.progID = ne.Uint16(data), ne.Uint32(data[4:])
		copy(r.tag[:], data[8:16])
	case unix.PERF_RECORD_KSYMBOL:
		// u64 addr, u32 len, u16 ksym_type, u16 flags, char name[] (NUL, padded to 8)
		if len(data) < 16 {
			return r, false
		}
		r.ksym.Addr, r.ksym.Len = ne.Uint64(data), ne.Uint32(data[8:])
		r.ksymType = ne.Uint16(data[12:])
		r.unregister = ne.Uint16(data[14:])&unix.PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER != 0
		n := bytes.IndexByte(data[16:], 0)
		if n < 0 {
			return r, false
		}
		r.ksym.Name = string(data[16 : 16+n])
		body = 16 + (n+1+7)&^7
	case unix.PERF_RECORD_LOST:
		// u64 id, u64 lost
		if body = 16; len(data) < body {
			return r, false
		}
		r.lost = ne.Uint64(data[8:])
	default:
		return r, false
	}
	if !withID {
		return r, true
	}
	if len(data) < body+sampleIDSize {
		return r, false
	}
	id := data[body:]
	r.pid, r.tid, r.time = ne.Uint32(id), ne.Uint32(id[4:]), ne.Uint64(id[8:])
	return r, true
}

// unload reports whether r is a program's unload.
func (r *record) unload() bool {
	return r.typ == unix.PERF_RECORD_BPF_EVENT && r.event == unix.PERF_BPF_EVENT_PROG_UNLOAD
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
