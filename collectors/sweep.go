package collectors

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sample is one program's cumulative counters, read in one sweep.
type Sample struct {
	ID              uint32
	Type            uint32 // kernel enum bpf_prog_type
	Tag             [8]byte
	Name            string // kernel's 16-byte name, NUL-trimmed
	RunTimeNs       uint64
	RunCnt          uint64
	RecursionMisses uint64
}

// Sweep walks every loaded program by id (BPF_PROG_GET_NEXT_ID), opens each
// (BPF_PROG_GET_FD_BY_ID), reads one small BPF_OBJ_GET_INFO_BY_FD (info_len
// covering the struct bpf_prog_info prefix up to and including
// recursion_misses, all array pointers zero, so the kernel copies no arrays)
// and closes the fd before moving on. It appends to buf and returns it,
// including the samples read before an error. Holds no fd when it returns.
// Programs that vanish between next-id and get-fd (ENOENT) are skipped
// silently.
//
// Counters only move while run-time stats are on (see EnableStats).
// Requires CAP_SYS_ADMIN, and Linux 5.12 for recursion_misses.
func Sweep(buf []Sample) ([]Sample, error) {
	var info progInfo
	for id := uint32(0); ; {
		next, ok, err := nextID(unix.BPF_PROG_GET_NEXT_ID, id)
		if err != nil || !ok {
			return buf, err
		}
		id = next

		fd, err := fdByID(unix.BPF_PROG_GET_FD_BY_ID, id)
		if errors.Is(err, ErrGone) {
			continue
		}
		if err != nil {
			return buf, err
		}
		info = progInfo{}
		err = objInfo(fd, unsafe.Pointer(&info), statsInfoLen)
		unix.Close(fd)
		if err != nil {
			return buf, err
		}
		buf = append(buf, Sample{
			ID:              info.id,
			Type:            info.typ,
			Tag:             info.tag,
			Name:            cString(info.name[:]),
			RunTimeNs:       info.runTimeNs,
			RunCnt:          info.runCnt,
			RecursionMisses: info.recursionMisses,
		})
	}
}
