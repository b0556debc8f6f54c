package loadrec

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"golang.org/x/sys/unix"
)

// Source says where a Load's Comm and CgroupID were found. PID and TID
// always come from the kernel's record itself.
type Source uint8

const (
	// SourceNone: neither the map nor /proc had the loader (it had exited
	// and its entry was gone or was another process's); Comm is "" and
	// CgroupID 0.
	SourceNone Source = iota
	// SourceMap: the entry the sys_enter_bpf program wrote for the
	// loading thread as it called BPF_PROG_LOAD, before the kernel made
	// the record, so it is there even when the loader has long exited.
	SourceMap
	// SourceProc: /proc/PID/comm and /proc/PID/cgroup, read when the
	// record was; only where the map had nothing (no tracepoint, an entry
	// evicted by the LRU). The loader may have exited by then (a miss),
	// or, in theory, its pid have been reused (a wrong answer).
	SourceProc
)

func (s Source) String() string {
	switch s {
	case SourceMap:
		return "map"
	case SourceProc:
		return "proc"
	}
	return "none"
}

// joiner finds a loading task's command and cgroup.
type joiner struct {
	objs       *loadersObjects // nil where the tracepoint could not be attached
	link       link.Link
	procRoot   string
	cgroupRoot string // the cgroup2 mount; "" where there is none
	forget     func() // the program no longer the daemon's own
}

// attach loads the sys_enter_bpf program with an LRU map of entries
// entries and attaches it (Linux 4.18 for bpf_get_current_cgroup_id; the
// program reads task_struct through CO-RE, so the kernel needs BTF).
func (j *joiner) attach(entries int) error {
	spec, err := loadLoaders()
	if err != nil {
		return err
	}
	spec.Maps[loadersMapLoaders].MaxEntries = uint32(entries)
	objs := new(loadersObjects)
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return fmt.Errorf("load sys_enter_bpf program: %w", err)
	}
	l, err := link.Tracepoint("syscalls", "sys_enter_bpf", objs.BpfperfLoadrec, nil)
	if err != nil {
		objs.Close()
		return fmt.Errorf("attach to syscalls/sys_enter_bpf: %w", err)
	}
	j.objs, j.link = objs, l
	j.forget = collectors.MarkOwn(objs.BpfperfLoadrec)
	return nil
}

func (j *joiner) close() {
	if j.forget != nil {
		j.forget()
	}
	if j.link != nil {
		j.link.Close()
	}
	if j.objs != nil {
		j.objs.Close()
	}
}

// join fills l's Comm, CgroupID and Source from the map, else /proc.
func (j *joiner) join(l *Load) {
	if j.objs != nil {
		// The entry is keyed by tid. It is this load's when its pid is
		// the record's: the tracepoint wrote it at the start of this very
		// bpf(2) call (or of a later load by the same thread, which is the
		// same process). Another pid means the tid was reused by a task
		// whose load the tracepoint did not see (a compat syscall, which
		// syscall tracepoints skip): not ours.
		// A failed lookup is a miss like a missing key: /proc may know.
		var e loadersLoader
		if err := j.objs.Loaders.Lookup(uint32(l.TID), &e); err == nil && int(e.Pid) == l.PID {
			l.Comm = unix.ByteSliceToString(commBytes(e.Comm[:]))
			l.CgroupID = e.CgroupId
			l.CgroupTail = cgroupTail(commBytes(e.CgroupParent[:]), commBytes(e.CgroupLeaf[:]))
			l.Source = SourceMap
			return
		}
	}
	comm, err := os.ReadFile(filepath.Join(j.procRoot, strconv.Itoa(l.PID), "comm"))
	if err != nil {
		return // gone: SourceNone
	}
	l.Comm = strings.TrimSuffix(string(comm), "\n")
	l.Source = SourceProc
	l.CgroupID, _ = cgroupid.OfTask(j.cgroupRoot, filepath.Join(j.procRoot, strconv.Itoa(l.PID), "cgroup"))
}

// commBytes turns a C char array as bpf2go types it into bytes.
func commBytes(c []int8) []byte {
	b := make([]byte, len(c))
	for i, v := range c {
		b[i] = byte(v)
	}
	return b
}

// cgroupTail joins the names of a cgroup and its parent into a path's
// tail: "" for the root (whose name is "/" and parent none), the leaf
// alone under the root.
func cgroupTail(parent, leaf []byte) string {
	p, l := unix.ByteSliceToString(parent), unix.ByteSliceToString(leaf)
	if l == "" || l == "/" {
		return ""
	}
	if p == "" || p == "/" {
		return l
	}
	return p + "/" + l
}
