package collectors

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// enotsupp is the kernel's ENOTSUPP (524), which BPF_TASK_FD_QUERY returns
// for an fd that is neither a perf event nor a raw tracepoint link. It is
// not EOPNOTSUPP and x/sys/unix does not define it.
const enotsupp = syscall.Errno(524)

// taskFDQueryAttr is the bpf_attr layout of BPF_TASK_FD_QUERY.
type taskFDQueryAttr struct {
	pid         uint32         // 0
	fd          uint32         // 4
	flags       uint32         // 8
	bufLen      uint32         // 12, in: buf's size; out: the name's length
	buf         unsafe.Pointer // 16
	progID      uint32         // 24
	fdType      uint32         // 28
	probeOffset uint64         // 32
	probeAddr   uint64         // 40
}

// The layout must match the kernel's 48 bytes exactly.
var (
	_ [48 - unsafe.Sizeof(taskFDQueryAttr{})]byte
	_ [unsafe.Sizeof(taskFDQueryAttr{}) - 48]byte
)

// taskFDTypes are the kinds of enum bpf_task_fd_type in the words
// perfEventTarget uses for a perf_event link, indexed by value.
var taskFDTypes = [...]string{
	unix.BPF_FD_TYPE_RAW_TRACEPOINT: "raw_tracepoint",
	unix.BPF_FD_TYPE_TRACEPOINT:     "tracepoint",
	unix.BPF_FD_TYPE_KPROBE:         "kprobe",
	unix.BPF_FD_TYPE_KRETPROBE:      "kretprobe",
	unix.BPF_FD_TYPE_UPROBE:         "uprobe",
	unix.BPF_FD_TYPE_URETPROBE:      "uretprobe",
}

// PerfEventAttach returns, by program id, the programs attached to the
// perf events that the processes pids hold open. A tracepoint, kprobe or
// uprobe program set on a perf event with PERF_EVENT_IOC_SET_BPF has no
// bpf_link (bpftrace 0.17 attaches so), so Links cannot see it; the
// kernel answers BPF_TASK_FD_QUERY for each such fd, as `bpftool perf`
// asks. Only the given pids are read, since every fd costs a syscall.
//
// Entries have Type "perf_event", LinkID 0 and a Target worded as a
// perf_event link's in Links ("tracepoint sys_enter_openat", "kprobe
// FUNC", "uprobe FILE"). A program on several events of one target (one
// per CPU) is listed once. Events attached through a perf_event link are
// reported too, since the kernel answers alike; MergeAttach with Links
// lists them once. Programs of type perf_event (sampling) are not
// reported: the kernel does not answer for them. Processes and fds that
// go away meanwhile are skipped.
//
// Pids are this process's pid namespace's. Requires CAP_SYS_ADMIN and
// Linux 4.18.
func PerfEventAttach(pids []int) (map[uint32][]AttachPoint, error) {
	out := make(map[uint32][]AttachPoint)
	for _, pid := range pids {
		if err := addPerfEvents(out, pid); err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
	}
	return out, nil
}

// addPerfEvents adds the programs on the perf events pid holds.
func addPerfEvents(out map[uint32][]AttachPoint, pid int) error {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the process is gone
	}
	if err != nil {
		return fmt.Errorf("list fds: %w", err)
	}
	for _, e := range fds {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err != nil || target != "anon_inode:[perf_event]" {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		id, ap, err := queryTaskFD(pid, fd)
		switch {
		case errors.Is(err, unix.ENOENT), // no program on this event, or the process is gone
			errors.Is(err, enotsupp),        // not a perf event (the fd was reused)
			errors.Is(err, unix.EOPNOTSUPP), // a perf_event program
			errors.Is(err, unix.EBADF):      // the fd was closed
			continue
		case err != nil:
			return fmt.Errorf("fd %d: %w", fd, err)
		}
		out[id] = appendNew(out[id], ap)
	}
	return nil
}

// queryTaskFD asks the kernel which program pid's fd runs and where.
// Errors keep the kernel's errno matchable.
func queryTaskFD(pid, fd int) (uint32, AttachPoint, error) {
	buf := make([]byte, 512) // as linkName, so long names cut alike
	attr := taskFDQueryAttr{pid: uint32(pid), fd: uint32(fd), bufLen: uint32(len(buf)), buf: unsafe.Pointer(&buf[0])}
	_, err := bpf(unix.BPF_TASK_FD_QUERY, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	switch {
	case err == unix.EPERM:
		return 0, AttachPoint{}, wrapErrno("task fd query", err)
	case err == unix.ENOSPC:
		// The name was cut to the buffer, still NUL-terminated.
	case err != nil:
		return 0, AttachPoint{}, fmt.Errorf("task fd query: %w", err)
	}
	target := ""
	if int(attr.fdType) < len(taskFDTypes) {
		target = taskFDTypes[attr.fdType]
		if name := cString(buf); name != "" {
			target += " " + name
		}
	}
	return attr.progID, AttachPoint{Type: LinkTypeName(linkPerfEvent), Target: target}, nil
}
