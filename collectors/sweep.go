package collectors

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sample is one program's cumulative counters, read in one sweep.
type Sample struct {
	ID              uint32
	Type            uint32 // kernel enum bpf_prog_type
	Tag             [8]byte
	Name            string // kernel's 16-byte name, NUL-trimmed
	LoadTime        uint64 // ns since boot (CLOCK_BOOTTIME)
	RunTimeNs       uint64
	RunCnt          uint64
	RecursionMisses uint64
}

// Sweep walks every loaded program by id (BPF_PROG_GET_NEXT_ID), opens each
// (BPF_PROG_GET_FD_BY_ID), reads one small BPF_OBJ_GET_INFO_BY_FD (info_len
// covering the struct bpf_prog_info prefix up to and including
// recursion_misses, all array pointers zero, so the kernel copies no arrays)
// and closes the fd before moving on. It appends to buf and returns it.
// Holds no fd when it returns. Programs that vanish between next-id and
// get-fd (ENOENT) are skipped silently; programs the kernel refuses to open
// or describe are skipped and reported as a *SkippedError beside the good
// samples, unless none could be read, when the first refusal is returned.
//
// Counters only move while run-time stats are on (see EnableStats).
// Requires CAP_SYS_ADMIN, and Linux 5.12 for recursion_misses.
func Sweep(buf []Sample) ([]Sample, error) {
	var info progInfo
	start, skipped := len(buf), 0
	var first error
	skip := func(err error) {
		if skipped++; first == nil {
			first = err
		}
	}
	for id := uint32(0); ; {
		next, ok, err := nextID(unix.BPF_PROG_GET_NEXT_ID, id)
		if err != nil {
			return buf, err
		}
		if !ok {
			break
		}
		id = next

		smp, err := readProgram(id, &info)
		if errors.Is(err, ErrGone) {
			continue
		}
		if err != nil {
			// One program the kernel will not open or describe (a security
			// module can deny single programs) must not blind us to all
			// the others.
			skip(err)
			continue
		}
		buf = append(buf, smp)
	}
	switch {
	case skipped == 0:
		return buf, nil
	case len(buf) == start:
		return buf, first // nothing could be read: not a partial sweep
	default:
		return buf, &SkippedError{Skipped: skipped, First: first}
	}
}

// readProgram opens program id, reads its counters with one small
// BPF_OBJ_GET_INFO_BY_FD into info and closes it.
func readProgram(id uint32, info *progInfo) (Sample, error) {
	fd, err := openProgram(unix.BPF_PROG_GET_FD_BY_ID, id)
	if err != nil {
		return Sample{}, err
	}
	*info = progInfo{}
	err = objInfo(fd, unsafe.Pointer(info), statsInfoLen)
	closeFD(fd)
	if err != nil {
		return Sample{}, err
	}
	return Sample{
		ID:              info.id,
		Type:            info.typ,
		Tag:             info.tag,
		Name:            cString(info.name[:]),
		LoadTime:        info.loadTime,
		RunTimeNs:       info.runTimeNs,
		RunCnt:          info.runCnt,
		RecursionMisses: info.recursionMisses,
	}, nil
}

// openProgram is fdByID; tests replace it to make the kernel refuse one
// program.
var openProgram = fdByID

// SkippedError says a sweep read every program it could but had to skip
// some; the samples it returned are good.
type SkippedError struct {
	Skipped int
	First   error // why the first was skipped
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("skipped %d programs: %v", e.Skipped, e.First)
}

func (e *SkippedError) Unwrap() error { return e.First }
