package bench

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// progTestRunAttr is the BPF_PROG_TEST_RUN part of union bpf_attr. We issue
// the syscall ourselves because cilium/ebpf's Program.Run drops the
// duration and Program.Benchmark takes no context.
type progTestRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// Input is what one BPF_PROG_TEST_RUN call hands the program.
type Input struct {
	Data    []byte // packet, for the types that take one
	Context []byte // ctx_in (e.g. a struct __sk_buff), optional
}

// errInterrupted means a signal cut the batch short; the measurement is
// worthless and is taken again.
var errInterrupted = errors.New("test run interrupted")

// testRun runs prog repeat times in the kernel and returns the last run's
// return value and the kernel's mean duration per run in nanoseconds
// (rounded down by the kernel).
func testRun(prog *ebpf.Program, in Input, repeat uint32) (retval, ns uint32, err error) {
	attr := progTestRunAttr{
		progFD: uint32(prog.FD()),
		repeat: repeat,
	}
	if len(in.Data) > 0 {
		attr.dataIn = uint64(uintptr(unsafe.Pointer(&in.Data[0])))
		attr.dataSizeIn = uint32(len(in.Data))
	}
	if len(in.Context) > 0 {
		attr.ctxIn = uint64(uintptr(unsafe.Pointer(&in.Context[0])))
		attr.ctxSizeIn = uint32(len(in.Context))
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(in.Data)
	runtime.KeepAlive(in.Context)
	switch {
	case errno == 0:
		return attr.retval, attr.duration, nil
	case errno == unix.EINTR:
		return 0, 0, errInterrupted
	case errno == enotsupp || errno == unix.EOPNOTSUPP:
		return 0, 0, fmt.Errorf("test run of %s: %w", prog.Type(), ErrNoTestRun)
	default:
		return 0, 0, fmt.Errorf("test run: %w", errno)
	}
}

// enotsupp is the kernel-internal ENOTSUPP that BPF_PROG_TEST_RUN returns
// for program types without a test runner; x/sys/unix does not name it.
const enotsupp = unix.Errno(524)
