package loadrec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"golang.org/x/sys/unix"
)

// Source says where a Load's loader was found.
type Source uint8

const (
	// SourceNone: the loader is unknown. With the programs: the load was
	// made in a way they did not see (with the tracepoints: a call in
	// flight as they were attached, a compat call, the kernel's own), or
	// the map was full. Without them: it had exited before /proc was
	// read. PID is 0 with the programs; Comm is "" and CgroupID 0.
	SourceNone Source = iota
	// SourceMap: the entry written for this program id in the loading
	// thread's BPF_PROG_LOAD (by the fentry program, or the syscall
	// tracepoints), so it is there even when the loader has long exited.
	SourceMap
	// SourceProc: /proc/PID/comm and /proc/PID/cgroup of the record's pid,
	// read when the record was; only where neither the fentry program
	// nor the tracepoints could be attached. The loader may have exited
	// by then (a miss), or, in theory, its pid have been reused (a wrong
	// answer).
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

// joiner finds who loaded a program: the entry its programs wrote by
// program id, else /proc by the record's pid.
type joiner struct {
	loaded     *ebpf.Map       // by program id; nil where none of the programs could be attached
	by         string          // how the entries are written, for status
	progs      []*ebpf.Program // the programs that write them
	links      []link.Link
	procRoot   string
	cgroupRoot string // the cgroup2 mount; "" where there is none
	forget     func() // the programs no longer the daemon's own
}

// The two ways the entries are written (bpf/loadrec/loaders.c).
const (
	byFentry      = "an fentry program on perf_event_bpf_event"
	byTracepoints = "tracepoints on sys_enter_bpf and sys_exit_bpf"
)

// attach loads and attaches the programs that keep who loaded what, with
// maps of entries entries: the fentry program where the kernel can
// attach tracing programs (it costs nothing but loads), else the two
// syscall tracepoints, both or neither (the programs read kernel structs
// through CO-RE, so the kernel needs BTF; tracing programs need Linux 5.5
// on x86-64, 6.0 on arm64). The error says why neither way works.
func (j *joiner) attach(entries int, tracepointsOnly bool) error {
	var ferr error
	if !tracepointsOnly {
		if ferr = j.attachFentry(entries); ferr == nil {
			return nil
		}
	}
	err := j.attachTracepoints(entries)
	if err != nil && ferr != nil {
		return fmt.Errorf("%w (and %s: %v)", err, byFentry, ferr)
	}
	return err
}

func (j *joiner) spec(entries int) (*ebpf.CollectionSpec, error) {
	spec, err := loadLoaders()
	if err != nil {
		return nil, err
	}
	for _, m := range []string{"loading", "loaded"} {
		spec.Maps[m].MaxEntries = uint32(entries)
	}
	return spec, nil
}

func (j *joiner) attachFentry(entries int) error {
	spec, err := j.spec(entries)
	if err != nil {
		return err
	}
	var objs struct {
		Prog   *ebpf.Program `ebpf:"bpfperf_loadent"`
		Loaded *ebpf.Map     `ebpf:"loaded"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		// The kernel's answer alone: cilium/ebpf's hint about MEMLOCK
		// misleads where a kernel refuses tracing programs (EPERM).
		var errno unix.Errno
		if errors.As(err, &errno) {
			return fmt.Errorf("the kernel refused it: %w", errno)
		}
		return fmt.Errorf("load: %w", err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: objs.Prog})
	if err != nil {
		objs.Prog.Close()
		objs.Loaded.Close()
		return fmt.Errorf("attach: %w", err)
	}
	j.done(byFentry, objs.Loaded, []*ebpf.Program{objs.Prog}, []link.Link{l})
	return nil
}

func (j *joiner) attachTracepoints(entries int) error {
	spec, err := j.spec(entries)
	if err != nil {
		return err
	}
	var objs struct {
		Enter   *ebpf.Program `ebpf:"bpfperf_loadrec"`
		Exit    *ebpf.Program `ebpf:"bpfperf_loaded"`
		Loading *ebpf.Map     `ebpf:"loading"`
		Loaded  *ebpf.Map     `ebpf:"loaded"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return fmt.Errorf("load the sys_enter_bpf and sys_exit_bpf programs: %w", err)
	}
	closeAll := func(links []link.Link) {
		for _, l := range links {
			l.Close()
		}
		for _, c := range []interface{ Close() error }{objs.Enter, objs.Exit, objs.Loading, objs.Loaded} {
			c.Close()
		}
	}
	// The exit first: an entry whose exit is not seen waits in the map for
	// nothing, an exit whose entry is not seen does nothing.
	var links []link.Link
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{{"sys_exit_bpf", objs.Exit}, {"sys_enter_bpf", objs.Enter}} {
		l, err := link.Tracepoint("syscalls", tp.name, tp.prog, nil)
		if err != nil {
			closeAll(links)
			return fmt.Errorf("attach to syscalls/%s: %w", tp.name, err)
		}
		links = append(links, l)
	}
	// loading is the programs' own: they keep it while attached.
	objs.Loading.Close()
	j.done(byTracepoints, objs.Loaded, []*ebpf.Program{objs.Enter, objs.Exit}, links)
	return nil
}

func (j *joiner) done(by string, loaded *ebpf.Map, progs []*ebpf.Program, links []link.Link) {
	j.by, j.loaded, j.progs, j.links = by, loaded, progs, links
	j.forget = collectors.MarkOwn(progs...)
}

// attached says whether entries are written: loaders come from the map
// by program id, and the records need not say who made them.
func (j *joiner) attached() bool { return j.loaded != nil }

func (j *joiner) close() {
	if j.forget != nil {
		j.forget()
	}
	for _, l := range j.links {
		l.Close()
	}
	for _, p := range j.progs {
		p.Close()
	}
	if j.loaded != nil {
		j.loaded.Close()
	}
}

// fromMap fills l's loader from the programs' entry for its program,
// which it then deletes, and says whether there was one. A failed lookup
// is a miss like a missing key.
func (j *joiner) fromMap(l *Load, wallOf func(mono uint64) time.Time) bool {
	var e loadersLoader
	if err := j.loaded.Lookup(l.ProgID, &e); err != nil {
		return false
	}
	j.loaded.Delete(l.ProgID)
	l.PID, l.TID, l.Time = int(e.Pid), int(e.Tid), wallOf(e.TimeNs)
	l.Comm = unix.ByteSliceToString(commBytes(e.Comm[:]))
	l.CgroupID = e.CgroupId
	l.CgroupTail = cgroupTail(commBytes(e.CgroupParent[:]), commBytes(e.CgroupLeaf[:]))
	l.Source = SourceMap
	return true
}

// staleAfter is how old an entry of the programs' map must be to be
// swept out: a load record is read within milliseconds of the load, so
// an entry this old had its record dropped by a full ring.
const staleAfter = 30 * time.Second

// sweep deletes the entries written before cutoff (CLOCK_MONOTONIC ns),
// whose records were lost: the map refuses new loads once full.
func (j *joiner) sweep(cutoff uint64) {
	if j.loaded == nil {
		return
	}
	var stale []uint32
	var id uint32
	var e loadersLoader
	for it := j.loaded.Iterate(); it.Next(&id, &e); {
		if e.TimeNs < cutoff {
			stale = append(stale, id)
		}
	}
	for _, id := range stale {
		j.loaded.Delete(id)
	}
}

// fromProc fills l's command and cgroup from /proc by the record's pid,
// where the programs are not attached.
func (j *joiner) fromProc(l *Load) {
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
