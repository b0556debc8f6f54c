// Package collectors reads what the kernel knows about loaded BPF programs:
// cumulative run-time counters (Sweep), per-instance metadata (ReadMeta),
// attach points (Links), owning processes (Owners), and the switch that makes
// the kernel count at all (EnableStats).
//
// Nothing here holds a program between calls: every fd opened by id is
// closed before the function returns, so bpfperf never keeps a program
// loaded after its owner lets it go.
package collectors

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/transientfd"
)

var (
	// ErrNotPermitted is returned when the kernel refuses a bpf(2) command
	// for lack of privilege.
	ErrNotPermitted = errors.New("bpfperfd needs CAP_SYS_ADMIN (get-fd-by-id; it covers CAP_BPF and CAP_PERFMON too)")
	// ErrGone is returned when a program or link went away before it could
	// be read. It matches os.ErrNotExist.
	ErrGone = fmt.Errorf("bpf object is gone: %w", os.ErrNotExist)
)

// getNextIDAttr is the bpf_attr layout of BPF_{PROG,LINK}_GET_NEXT_ID and
// BPF_{PROG,LINK}_GET_FD_BY_ID: the id sits in the first word in both.
type getNextIDAttr struct {
	id        uint32 // start_id or prog_id/link_id
	nextID    uint32
	openFlags uint32
}

// objInfoAttr is the bpf_attr layout of BPF_OBJ_GET_INFO_BY_FD.
type objInfoAttr struct {
	fd      uint32
	infoLen uint32
	info    unsafe.Pointer // a real pointer, so a stack move updates it
}

// progInfo mirrors struct bpf_prog_info (include/uapi/linux/bpf.h, 232
// bytes on 6.18); offsets checked with offsetof against the UAPI header.
type progInfo struct {
	typ             uint32         // 0
	id              uint32         // 4
	tag             [8]byte        // 8
	jitedProgLen    uint32         // 16
	xlatedProgLen   uint32         // 20
	jitedProgInsns  uint64         // 24
	xlatedProgInsns uint64         // 32
	loadTime        uint64         // 40, ns since boot (CLOCK_BOOTTIME)
	createdByUID    uint32         // 48
	nrMapIDs        uint32         // 52
	mapIDs          unsafe.Pointer // 56, *uint32 array
	name            [16]byte       // 64
	ifindex         uint32         // 80
	flags           uint32         // 84, bit 0: gpl_compatible
	netnsDev        uint64         // 88
	netnsIno        uint64         // 96
	nrJitedKsyms    uint32         // 104
	nrJitedFuncLens uint32         // 108
	jitedKsyms      uint64         // 112
	jitedFuncLens   uint64         // 120
	btfID           uint32         // 128
	funcInfoRecSize uint32         // 132
	funcInfo        uint64         // 136
	nrFuncInfo      uint32         // 144
	nrLineInfo      uint32         // 148
	lineInfo        uint64         // 152
	jitedLineInfo   uint64         // 160
	nrJitedLineInfo uint32         // 168
	lineInfoRecSize uint32         // 172
	jitedLineRecSz  uint32         // 176
	nrProgTags      uint32         // 180
	progTags        uint64         // 184
	runTimeNs       uint64         // 192
	runCnt          uint64         // 200
	recursionMisses uint64         // 208
	verifiedInsns   uint32         // 216
	attachBTFObjID  uint32         // 220
	attachBTFID     uint32         // 224
	_               uint32         // 228
}

// statsInfoLen covers bpf_prog_info up to and including recursion_misses.
// With every array pointer zero the kernel copies no arrays, which keeps
// the per-tick info call small.
const statsInfoLen = uint32(unsafe.Offsetof(progInfo{}.recursionMisses) + 8)

// The layout must match the kernel's 232 bytes exactly.
var (
	_ [232 - unsafe.Sizeof(progInfo{})]byte
	_ [unsafe.Sizeof(progInfo{}) - 232]byte
	_ [216 - statsInfoLen]byte
	_ [statsInfoLen - 216]byte
)

func bpf(cmd uintptr, attr unsafe.Pointer, size uintptr) (uintptr, error) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(attr), size)
	if errno != 0 {
		return r, errno
	}
	return r, nil
}

// nextID returns the id after id for BPF_PROG_GET_NEXT_ID or
// BPF_LINK_GET_NEXT_ID; ok is false past the last one.
func nextID(cmd uintptr, id uint32) (next uint32, ok bool, err error) {
	attr := getNextIDAttr{id: id}
	_, err = bpf(cmd, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	switch {
	case err == unix.ENOENT:
		return 0, false, nil
	case err != nil:
		return 0, false, wrapErrno("get next id", err)
	}
	return attr.nextID, true, nil
}

// fdByID opens a program, link or map by id for a moment: close it with
// closeFD, which ends the brief hold (internal/transientfd) that keeps it out
// of holder scans. The kernel sets O_CLOEXEC.
func fdByID(cmd uintptr, id uint32) (int, error) {
	transientfd.Open()
	attr := getNextIDAttr{id: id}
	fd, err := bpf(cmd, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		transientfd.Done()
		return -1, wrapErrno(fmt.Sprintf("get fd by id %d", id), err)
	}
	return int(fd), nil
}

// closeFD closes an fd fdByID opened.
func closeFD(fd int) {
	unix.Close(fd)
	transientfd.Done()
}

// objInfo fills the first size bytes of info for fd.
func objInfo(fd int, info unsafe.Pointer, size uint32) error {
	attr := objInfoAttr{fd: uint32(fd), infoLen: size, info: info}
	_, err := bpf(unix.BPF_OBJ_GET_INFO_BY_FD, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return wrapErrno("get info by fd", err)
	}
	return nil
}

// wrapErrno turns EPERM into ErrNotPermitted and ENOENT into ErrGone while
// keeping the errno matchable.
func wrapErrno(op string, err error) error {
	switch err {
	case unix.EPERM:
		return fmt.Errorf("%s: %w: %w", op, err, ErrNotPermitted)
	case unix.ENOENT:
		return fmt.Errorf("%s: %w", op, ErrGone)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// cString trims a fixed-size kernel string at its first NUL.
func cString(b []byte) string { return string(cBytes(b)) }

// cBytes is cString without the copy: b up to its first NUL.
func cBytes(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
