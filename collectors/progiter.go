package collectors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ErrIterUnsupported says the kernel cannot run the iterator sweep: it is
// older than 5.19, has no BTF, or its verifier refused the program. It
// matches ebpf.ErrNotSupported where the cause is the kernel's age.
var ErrIterUnsupported = errors.New("iterator sweep not supported")

// recordSize is the size of struct record in bpf/progiter/progiter.c.
const recordSize = 64

// ProgIter is the iterator sweep: a BPF iterator over all programs
// (bpf/progiter) that writes every program's id, type, tag, name, load
// time and cumulative stats as a binary record, read in a few read() calls
// per sweep instead of four system calls per program.
//
// It holds its own program, map and link, and never a program it reads.
// Those are the daemon's own: the iterator program shows in every sweep,
// and its run time is the sweep's cost in the kernel.
//
// Requires Linux 5.19, kernel BTF, CAP_BPF and CAP_PERFMON.
type ProgIter struct {
	objs progiterObjects
	link *link.Iter
	id   uint32 // the iterator program's own id
	buf  []byte
}

// NewProgIter loads the iterator program and creates its link. Errors wrap
// ErrIterUnsupported when the kernel cannot run it, and ErrNotPermitted
// when privileges are missing.
func NewProgIter() (*ProgIter, error) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("%w: no kernel BTF: %w", ErrIterUnsupported, err)
	}
	spec, err := loadProgiter()
	if err != nil {
		return nil, fmt.Errorf("load iterator spec: %w", err)
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("possible cpus: %w", err)
	}
	if err := spec.Variables["nr_cpus"].Set(uint32(cpus)); err != nil {
		return nil, fmt.Errorf("set nr_cpus: %w", err)
	}
	it := &ProgIter{}
	if err := spec.LoadAndAssign(&it.objs, nil); err != nil {
		return nil, iterLoadError(err)
	}
	it.link, err = link.AttachIter(link.IterOptions{Program: it.objs.BpfperfProgs})
	if err != nil {
		it.objs.Close()
		return nil, iterLoadError(fmt.Errorf("create iterator link: %w", err))
	}
	info, err := it.objs.BpfperfProgs.Info()
	if err != nil {
		it.Close()
		return nil, fmt.Errorf("iterator program info: %w", err)
	}
	id, _ := info.ID()
	it.id = uint32(id)
	return it, nil
}

// iterLoadError sorts a load failure into "not permitted" or "the kernel
// can't", keeping the verifier's words.
func iterLoadError(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("load iterator: %w: %w", ErrNotPermitted, err)
	}
	return fmt.Errorf("%w: %w", ErrIterUnsupported, err)
}

// ProgramID is the kernel id of the iterator program itself.
func (it *ProgIter) ProgramID() uint32 { return it.id }

// Sweep reads every program's counters in one pass of the iterator and
// appends them to buf in id order, like Sweep. No program is opened.
func (it *ProgIter) Sweep(buf []Sample) ([]Sample, error) {
	data, err := it.read()
	if err != nil {
		return buf, err
	}
	for ; len(data) >= recordSize; data = data[recordSize:] {
		buf = append(buf, decodeRecord(data))
	}
	return buf, nil
}

// read runs the iterator once and returns all its records.
func (it *ProgIter) read() ([]byte, error) {
	r, err := it.link.Open()
	if err != nil {
		return nil, fmt.Errorf("open iterator: %w", err)
	}
	defer r.Close()
	if it.buf == nil {
		it.buf = make([]byte, 0, 64<<10)
	}
	data := it.buf[:0]
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read iterator: %w", err)
		}
	}
	it.buf = data
	if len(data)%recordSize != 0 {
		return nil, fmt.Errorf("read iterator: %d bytes is not a whole number of %d-byte records", len(data), recordSize)
	}
	return data, nil
}

// decodeRecord reads one struct record (bpf/progiter/progiter.c).
func decodeRecord(b []byte) Sample {
	le := binary.LittleEndian
	s := Sample{
		ID:              le.Uint32(b[0:]),
		Type:            le.Uint32(b[4:]),
		Name:            cString(b[16:32]),
		LoadTime:        le.Uint64(b[32:]),
		RunCnt:          le.Uint64(b[40:]),
		RunTimeNs:       le.Uint64(b[48:]),
		RecursionMisses: le.Uint64(b[56:]),
	}
	copy(s.Tag[:], b[8:16])
	return s
}

// Close unloads the iterator.
func (it *ProgIter) Close() error {
	var errs []error
	if it.link != nil {
		errs = append(errs, it.link.Close())
	}
	errs = append(errs, it.objs.Close())
	return errors.Join(errs...)
}
