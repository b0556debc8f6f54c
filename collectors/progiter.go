package collectors

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ErrIterUnsupported says the kernel cannot run the iterator sweep: it is
// older than 5.19, has no BTF, or its verifier refused the program. It
// matches ebpf.ErrNotSupported where the cause is the kernel's age.
var ErrIterUnsupported = errors.New("iterator sweep not supported")

// ErrIterMismatch says the iterator's figures for an idle program differ
// from OBJ_GET_INFO_BY_FD's: the iterator cannot be trusted on this kernel.
var ErrIterMismatch = errors.New("iterator sweep differs from OBJ_GET_INFO_BY_FD")

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
	// mu makes walks one at a time: the changed-only sweep keeps its
	// state in the program's globals (progiter_changed.go). epoch is the
	// last value given to the program's.
	mu    sync.Mutex
	epoch uint64
	// forget drops the program from this process's own (own.go).
	forget func()
}

// NewProgIter loads the iterator program and creates its link. Errors wrap
// ErrIterUnsupported when the kernel cannot run it, and ErrNotPermitted
// when privileges are missing.
func NewProgIter() (*ProgIter, error) {
	return loadProgIter(progIterOptions{})
}

// progIterOptions are the iterator program's test settings.
type progIterOptions struct {
	// cachedCPUs limits the per-CPU offset cache to the first cachedCPUs
	// CPUs, 0 for the program's default (1,024): tests set 1 to run the
	// path a machine with more CPUs takes.
	cachedCPUs uint32
	// noOutput makes the program read every program and write nothing,
	// for the floor benchmark.
	noOutput bool
}

// loadProgIter is NewProgIter with test settings.
func loadProgIter(opts progIterOptions) (*ProgIter, error) {
	if err := iterKernel(5, 19, "bpf_map_lookup_percpu_elem"); err != nil {
		return nil, err
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
	if opts.cachedCPUs > 0 {
		if err := spec.Variables["cached_cpus"].Set(opts.cachedCPUs); err != nil {
			return nil, fmt.Errorf("set cached_cpus: %w", err)
		}
	}
	if opts.noOutput {
		if err := spec.Variables["no_output"].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("set no_output: %w", err)
		}
	}
	if !opts.noOutput { // the floor writes nothing and remembers nothing
		spec.Maps["last"].MaxEntries = lastEntries(countPrograms())
	}
	it := &ProgIter{}
	if err := spec.LoadAndAssign(&it.objs, nil); err != nil {
		return nil, iterLoadError(err)
	}
	it.forget = MarkOwn(it.objs.BpfperfProgs)
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
	it.mu.Lock()
	defer it.mu.Unlock()
	// Where the globals cannot be set, SweepChanged never set it either.
	_ = it.objs.ChangedOnly.Set(uint32(0))
	data, err := it.read()
	if err != nil {
		return buf, err
	}
	return appendRecords(buf, data), nil
}

// appendRecords decodes the iterator's records in data onto buf.
func appendRecords(buf []Sample, data []byte) []Sample {
	for ; len(data) >= recordSize; data = data[recordSize:] {
		s := decodeRecord(data)
		s.Name = keptName(buf, s.ID, recordName(data))
		buf = append(buf, s)
	}
	return buf
}

// read runs the iterator once and returns all its records.
func (it *ProgIter) read() ([]byte, error) {
	if it.buf == nil {
		it.buf = make([]byte, 0, 64<<10)
	}
	data, err := readIter(it.link, it.buf, recordSize)
	if err != nil {
		return nil, err
	}
	it.buf = data
	return data, nil
}

// readIter runs an iterator once, reading all it writes into buf (grown as
// needed), and checks that it is a whole number of records. The
// iterator's fd is made, read and closed with plain system calls: the
// os.File that link.Iter.Open wraps it in costs, for a file read once,
// an fcntl, a poller registration and removal and a cleanup record,
// each tick, on a host where the daemon's whole tick is a few of them.
func readIter(l *link.Iter, buf []byte, record int) ([]byte, error) {
	attr := iterCreateAttr{linkFD: uint32(l.FD())}
	r, err := bpf(unix.BPF_ITER_CREATE, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return nil, fmt.Errorf("open iterator: %w", err)
	}
	fd := int(r)
	defer unix.Close(fd)
	data := buf[:0]
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := unix.Read(fd, data[len(data):cap(data)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read iterator: %w", err)
		}
		if n == 0 {
			break
		}
		data = data[:len(data)+n]
	}
	if len(data)%record != 0 {
		return nil, fmt.Errorf("read iterator: %d bytes is not a whole number of %d-byte records", len(data), record)
	}
	return data, nil
}

// iterCreateAttr is BPF_ITER_CREATE's attribute.
type iterCreateAttr struct {
	linkFD, flags uint32
}

// Check proves the iterator against OBJ_GET_INFO_BY_FD on up to n
// programs spread over the id range: two iterator sweeps around one info
// read per program, and every program idle between the two sweeps must
// read the same both ways. It returns how many idle programs agreed, or an
// error wrapping ErrIterMismatch naming the first that did not. Programs
// that ran in between or went away are not compared.
func (it *ProgIter) Check(n int) (int, error) {
	first, err := it.Sweep(nil)
	if err != nil {
		return 0, err
	}
	step := max(1, len(first)/max(1, n))
	var info progInfo
	var fd []Sample
	for i := 0; i < len(first) && len(fd) < n; i += step {
		if first[i].ID == it.id {
			continue // runs during every sweep
		}
		s, err := readProgram(first[i].ID, &info)
		if err != nil {
			continue // gone, or refused: the fd sweep would skip it too
		}
		fd = append(fd, s)
	}
	second, err := it.Sweep(nil)
	if err != nil {
		return 0, err
	}
	agreed := 0
	for _, f := range fd {
		a, ok1 := findByID(first, f.ID)
		b, ok2 := findByID(second, f.ID)
		if !ok1 || !ok2 || a != b {
			continue // busy or gone
		}
		if a != f {
			return agreed, fmt.Errorf("%w: program %d %q: iterator %d runs %d ns %d misses, info %d runs %d ns %d misses",
				ErrIterMismatch, f.ID, f.Name, a.RunCnt, a.RunTimeNs, a.RecursionMisses, f.RunCnt, f.RunTimeNs, f.RecursionMisses)
		}
		agreed++
	}
	return agreed, nil
}

// findByID finds id in samples sorted by id.
func findByID(samples []Sample, id uint32) (Sample, bool) {
	i, ok := slices.BinarySearchFunc(samples, id, func(s Sample, id uint32) int { return cmp.Compare(s.ID, id) })
	if !ok {
		return Sample{}, false
	}
	return samples[i], true
}

// iterKernel says whether the running kernel can load one of bpfperf's
// iterators: at least major.minor (for what, the feature that needs it)
// and with BTF, which their CO-RE relocations read. The error wraps
// ErrIterUnsupported.
func iterKernel(major, minor int, what string) error {
	if atLeast, known := kernelAtLeast(major, minor); known && !atLeast {
		got, gotMinor, _ := kernelVersion()
		return fmt.Errorf("%w: kernel %d.%d is older than %d.%d (%s)", ErrIterUnsupported, got, gotMinor, major, minor, what)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: no kernel BTF: %w", ErrIterUnsupported, err)
	}
	return nil
}

// closeIter closes an iterator's link (nil if never made) and its
// program's objects.
func closeIter(l *link.Iter, objs io.Closer, forget func()) error {
	if forget != nil {
		forget()
	}
	var errs []error
	if l != nil {
		errs = append(errs, l.Close())
	}
	errs = append(errs, objs.Close())
	return errors.Join(errs...)
}

// kernelAtLeast says whether the running kernel is major.minor or newer;
// known is false when its version cannot be read.
func kernelAtLeast(major, minor int) (atLeast, known bool) {
	got, gotMinor, ok := kernelVersion()
	return ok && (got > major || got == major && gotMinor >= minor), ok
}

// kernelVersion is the running kernel's major and minor version.
func kernelVersion() (major, minor int, ok bool) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return 0, 0, false
	}
	n, _ := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major, minor, n == 2
}

// decodeRecord reads one struct record (bpf/progiter/progiter.c), all but
// its name (recordName).
func decodeRecord(b []byte) Sample {
	le := binary.LittleEndian
	s := Sample{
		ID:              le.Uint32(b[0:]),
		Type:            le.Uint32(b[4:]),
		LoadTime:        le.Uint64(b[32:]),
		RunCnt:          le.Uint64(b[40:]),
		RunTimeNs:       le.Uint64(b[48:]),
		RecursionMisses: le.Uint64(b[56:]),
	}
	copy(s.Tag[:], b[8:16])
	return s
}

// recordName is a record's name, NUL-trimmed, as bytes.
func recordName(b []byte) []byte { return cBytes(b[16:32]) }

// keptName is name as a string for the sample about to be appended to
// buf. A caller that passes last sweep's buffer back (buf[:0], as the
// daemon does) has last sweep's sample in the slot this one takes: the
// same program keeps its name string, so an idle host allocates none per
// sweep.
func keptName(buf []Sample, id uint32, name []byte) string {
	if i := len(buf); i < cap(buf) {
		if old := buf[:i+1][i]; old.ID == id && old.Name == string(name) {
			return old.Name
		}
	}
	return string(name)
}

// Close unloads the iterator.
func (it *ProgIter) Close() error {
	return closeIter(it.link, &it.objs, it.forget)
}
