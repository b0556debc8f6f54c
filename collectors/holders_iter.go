package collectors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf/link"
)

// ErrHoldersOtherPIDs says the holders iterator's process ids are not
// this process's: bpfperfd runs in a pid namespace of its own, where
// /proc names processes differently.
var ErrHoldersOtherPIDs = errors.New("holders iterator: pids are not this pid namespace's")

// holderRecordSize is the size of struct record in bpf/holders/holders.c.
const holderRecordSize = 16

// Kinds of holders record (bpf/holders/holders.c).
const (
	holderProg = 1
	holderLink = 2
	holderMap  = 3
)

// HolderIter finds who holds BPF programs, links and maps in one pass of
// a task_file iterator (bpf/holders) over every open file on the host,
// where ScanHolders reads each process's fd directory and an fdinfo file
// per BPF fd. Holders are the same either way; the comm and cgroup of
// each holding process are read from /proc in both.
//
// Requires Linux 5.8 (task_file iterators), kernel BTF, CAP_BPF and
// CAP_PERFMON.
type HolderIter struct {
	objs   holdersObjects
	link   *link.Iter
	progID uint32
	buf    []byte
	forget func() // drops the program from this process's own (own.go)
}

// NewHolderIter loads the holders iterator. Errors wrap ErrIterUnsupported
// when the kernel cannot run it, and ErrNotPermitted when privileges are
// missing.
func NewHolderIter() (*HolderIter, error) {
	if err := iterKernel(5, 8, "task_file iterators"); err != nil {
		return nil, err
	}
	it := &HolderIter{}
	if err := loadHoldersObjects(&it.objs, nil); err != nil {
		return nil, iterLoadError(err)
	}
	it.forget = MarkOwn(it.objs.BpfperfHolders)
	var err error
	it.link, err = link.AttachIter(link.IterOptions{Program: it.objs.BpfperfHolders})
	if err != nil {
		it.objs.Close()
		return nil, iterLoadError(fmt.Errorf("create holders iterator link: %w", err))
	}
	info, err := it.objs.BpfperfHolders.Info()
	if err != nil {
		it.Close()
		return nil, fmt.Errorf("holders iterator program info: %w", err)
	}
	id, _ := info.ID()
	it.progID = uint32(id)
	return it, nil
}

// Scan returns every holder of a program (through a program or link fd)
// and of a map, as ScanHolders does, reading each holder's comm and
// cgroup from procRoot. It fails with ErrHoldersOtherPIDs when the
// kernel's pids are not procRoot's: it checks that it finds this process
// holding the iterator's own link.
func (it *HolderIter) Scan(procRoot string) (Holders, error) {
	if it.buf == nil {
		it.buf = make([]byte, 0, 16<<10)
	}
	data, err := readIter(it.link, it.buf, holderRecordSize)
	if err != nil {
		return Holders{}, fmt.Errorf("holders iterator: %w", err)
	}
	it.buf = data
	self := os.Getpid()
	sawSelf := false
	held := map[int]*heldIDs{}
	le := binary.LittleEndian
	for ; len(data) >= holderRecordSize; data = data[holderRecordSize:] {
		pid, kind, id := int(le.Uint32(data[0:])), le.Uint32(data[4:]), le.Uint32(data[8:])
		if pid == self && kind == holderLink && id == it.progID {
			sawSelf = true
		}
		if id == 0 {
			continue
		}
		h := held[pid]
		if h == nil {
			h = &heldIDs{}
			held[pid] = h
		}
		switch kind {
		case holderProg, holderLink:
			h.progs = append(h.progs, id)
		case holderMap:
			h.maps = append(h.maps, id)
		}
	}
	if !sawSelf {
		return Holders{}, fmt.Errorf("%w: this process (pid %d) not found holding the iterator's link", ErrHoldersOtherPIDs, self)
	}
	return holdersOf(procRoot, held), nil
}

// ProgramID is the kernel id of the iterator program itself.
func (it *HolderIter) ProgramID() uint32 { return it.progID }

// Close unloads the iterator.
func (it *HolderIter) Close() error {
	return closeIter(it.link, &it.objs, it.forget)
}
