// Package loadrec follows BPF program loads and unloads as they happen,
// from the kernel's own records, and says who loaded each program.
//
// A dummy perf event on every online CPU (a CPU that comes online later
// gets one within cpuEvery) asks for PERF_RECORD_BPF_EVENT (a program
// loaded or unloaded: its id and tag) and PERF_RECORD_KSYMBOL (its JIT
// images). The records name no loader, and a loader such as `bpftool prog
// load` exits within milliseconds, often before /proc/PID can be read; so
// BPF programs of the follower's own (an fentry program on
// perf_event_bpf_event, else tracepoint programs at the entry and the
// exit of every bpf(2) call) keep the process, thread, command, cgroup
// and time of each BPF_PROG_LOAD by the id of the program it made, in a
// map the follower reads when the load record comes (join.go). Loader
// facts are from the moment of loading, not whoever holds the program
// later.
//
// The kernel could append the pid, tid and time to each record itself
// (sample_id_all), but asking for them pads the records of every other
// reader that was there first (`perf record`, another bpfperfd: see
// sampleType): the follower asks only where neither way can be attached
// (no BTF; no tracing programs and no tracefs), and then finds the
// command and cgroup in /proc.
//
// Records can be lost when a ring fills faster than it is read. The kernel
// counts them and says how many (PERF_RECORD_LOST) the next time it writes
// to that ring; Lost adds them up. A caller that sees Lost grow must mend
// from a full sweep of the programs: the records are the fast path, the
// sweep stays the truth.
//
// The follower holds no fd of any program but its own.
// Requires Linux 5.1 (bpf_event, ksymbol) and, for its programs, kernel
// BTF, and tracing programs or tracefs.
package loadrec

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/cadence"
	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/perfring"
)

// Load is a program the kernel loaded.
type Load struct {
	ProgID uint32
	Tag    string // 16 hex chars, as collectors.Meta's
	// Time is when the loader called BPF_PROG_LOAD (SourceMap), else when
	// the kernel made the record (with a sample_id) or the follower read
	// it.
	Time time.Time
	// PID and TID are the loading task's: from the programs' entry
	// (SourceMap; the initial pid namespace's numbers), else from the
	// record's sample_id (as the follower's pid namespace sees them, 0
	// for a task outside it); 0 where unknown.
	PID, TID int
	// Comm (the loading process's command, as /proc/PID/comm) and
	// CgroupID (its cgroup v2 id) are found as Source says.
	Comm     string
	CgroupID uint64
	Source   Source
	// CgroupTail is the loader's cgroup v2 directory name and its
	// parent's ("system.slice/NAME.service"), as the sys_enter_bpf program
	// read them during the load (SourceMap only): what still names a unit
	// or container once the cgroup is gone and its id resolves to nothing.
	CgroupTail string
	// Ksyms are the program's JIT images (its main function first, then
	// its subprograms), from the PERF_RECORD_KSYMBOLs the kernel makes
	// just before the load record; empty where they were lost (or, without
	// a sample_id to tie them to the loading thread, went to another
	// CPU's ring than the load record: the loader was moved in between).
	Ksyms []Ksym
}

// Ksym is one image of BPF JIT code, as /proc/kallsyms lists it: a
// program's, a trampoline's or a dispatcher's.
type Ksym struct {
	Addr uint64
	Len  uint32
	Name string // "bpf_prog_<tag>_<name>", "bpf_trampoline_<key>", ...
}

// Unload is a program the kernel freed: its last fd, pin and link gone.
type Unload struct {
	ProgID uint32
	Tag    string
	Time   time.Time
}

// Config configures a Follower.
type Config struct {
	// OnLoad and OnUnload are called from the follower's goroutine, in
	// the order of the records' times, never at once. A slow callback
	// delays reading, and the kernel drops what does not fit the rings
	// meanwhile (see Lost). They must not call Close.
	OnLoad   func(Load)
	OnUnload func(Unload)
	// OnCode, if set, is told of BPF JIT code that belongs to no
	// program as the kernel registers it (gone false) and frees it (gone
	// true): trampolines and dispatchers, which kallsyms lists but no
	// program's info does. Called like OnLoad.
	OnCode func(k Ksym, gone bool)
	// RingPages is the size of each CPU's ring in pages, a power of two
	// (default 8: 32 KiB, about 250 loads, each a load record and a
	// ksymbol, between two reads).
	RingPages int
	// Loaders bounds each of the programs' two maps (default 1024
	// entries of 216 bytes): threads in the middle of a load (tracepoints
	// only), and loads
	// made between two reads of the rings, which run continuously. Past
	// it the newest loads go unnamed (loader unknown) until the follower
	// reads the records, or sweeps out, within cpuEvery, the entries of
	// records lost more than staleAfter ago.
	Loaders int
	// ProcRoot is where /proc is (default "/proc"); CgroupRoot the cgroup2
	// mount (default: found in ProcRoot/self/mountinfo; none means no
	// cgroup from /proc).
	ProcRoot, CgroupRoot string
	// Now is the wall clock that record times are mapped onto (default
	// time.Now).
	Now func() time.Time

	noTracepoint bool          // tests: sample_id and /proc only
	noFentry     bool          // tests: the syscall tracepoints even where fentry works
	cpuEvery     time.Duration // tests: how often online CPUs are read (default cpuEvery)
}

// cpuEvery is how often the follower reads which CPUs are online, to
// give a CPU that came online a ring: records made there before it has
// one are missed, and the sweep finds their programs.
const cpuEvery = 5 * time.Second

// Follower follows program loads and unloads. Close it.
type Follower struct {
	cfg   Config
	rings []*ring
	// watch wakes the loop when a ring has a record, through Go's own
	// poller: no thread waits in a system call for the follower.
	watch *perfring.Watcher
	join  joiner
	// joinErr says why the programs are not attached (nil when they
	// are); withID, that the records then carry a sample_id.
	joinErr error
	withID  bool
	lost    atomic.Uint64

	// The wall clock at the monotonic time mono: record times map onto
	// wall times from there.
	wall time.Time
	mono uint64

	// Read by the loop only.
	held   []record            // records read but not yet delivered, see deliver
	ksyms  map[uint32][]record // per tid (withID) or CPU, ksymbols not yet claimed by a load
	readAt uint64              // when the rings were last read: the time of records without a sample_id
	// Each CPU's ring, and the CPUs online at the last look: the rings
	// change on the loop only (syncCPUs), and are released after it.
	byCPU  map[int]*ring
	online map[int]bool

	stop, done chan struct{} // Close closes stop; the loop, done
	closeOnce  sync.Once
}

// hold is how long a record waits before it is delivered, so that one
// from another CPU's ring stamped a little earlier but read a little
// later (a load on one CPU, its unload on another) still comes first.
// The kernel stamps and writes a record with preemption off, so the gap
// is microseconds; a host that stops a vCPU for longer may still deliver
// out of order.
const hold = 10 * time.Millisecond

// loadWait is how long a load record waits for its loader's entry: the
// kernel makes the record inside BPF_PROG_LOAD, and the exit tracepoint
// writes the entry microseconds later as the call returns, unless the
// loader is preempted in between (the fentry program writes it before
// the record). Past it the load is delivered with its loader unknown
// (SourceNone): a load the programs did not see, or a full map.
const loadWait = 250 * time.Millisecond

// Bounds on ksymbols waiting for their load record: a program has at most
// 256 subprograms, and a load record lost leaves its ksymbols behind.
const (
	maxKsyms     = 512
	maxKsymTasks = 1024
)

// Open starts following loads and unloads. Where its programs cannot be
// attached (no BTF; no tracing programs and no tracefs) it follows them
// all the same, asks the
// kernel for each record's pid, and joins through /proc: JoinErr says
// why.
func Open(cfg Config) (*Follower, error) {
	if cfg.RingPages == 0 {
		cfg.RingPages = 8
	}
	if cfg.RingPages < 1 || cfg.RingPages&(cfg.RingPages-1) != 0 {
		return nil, fmt.Errorf("ring pages %d: not a power of two", cfg.RingPages)
	}
	if cfg.Loaders == 0 {
		cfg.Loaders = 1024
	}
	if cfg.Loaders < 1 {
		return nil, fmt.Errorf("loaders %d: want at least 1", cfg.Loaders)
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot, _ = cgroupid.Mount(filepath.Join(cfg.ProcRoot, "self/mountinfo"))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.cpuEvery == 0 {
		cfg.cpuEvery = cpuEvery
	}
	f := &Follower{
		cfg:    cfg,
		join:   joiner{procRoot: cfg.ProcRoot, cgroupRoot: cfg.CgroupRoot},
		stop:   make(chan struct{}),
		ksyms:  map[uint32][]record{},
		byCPU:  map[int]*ring{},
		online: map[int]bool{},
		done:   make(chan struct{}),
	}
	// The programs first, so that every load the rings report had its
	// entry written.
	if cfg.noTracepoint {
		f.joinErr = errors.New("programs left out by the caller")
	} else if err := f.join.attach(cfg.Loaders, cfg.noFentry); err != nil {
		f.joinErr = err
	}
	f.withID = !f.join.attached()
	if err := f.open(); err != nil {
		f.release()
		return nil, err
	}
	f.wall, f.mono = cfg.Now(), monoNow()
	go f.run()
	return f, nil
}

func (f *Follower) open() error {
	cpus, err := perfring.OnlineCPUs("/sys")
	if err != nil {
		return err
	}
	if f.watch, err = perfring.Watch(nil); err != nil {
		return err
	}
	for _, cpu := range cpus {
		if err := f.addRing(cpu); err != nil {
			return err
		}
	}
	return nil
}

// addRing opens cpu's ring, in place of any it had.
func (f *Follower) addRing(cpu int) error {
	r, err := openRing(cpu, f.cfg.RingPages, f.withID)
	if err != nil {
		return err
	}
	// Records it gets before the watch begins are read by the loop
	// right after (run reads every ring after each look at the CPUs).
	if err := f.watch.Add(r.Ring); err != nil {
		r.Close()
		return err
	}
	if old := f.byCPU[cpu]; old != nil {
		f.readAt = monoNow()
		old.read(f.take) // what it still holds
		f.watch.Remove(old.Ring)
		old.Close()
		f.rings = slices.DeleteFunc(f.rings, func(r *ring) bool { return r == old })
	}
	f.rings, f.byCPU[cpu], f.online[cpu] = append(f.rings, r), r, true
	return nil
}

// syncCPUs gives each CPU that came online since the last look a ring:
// a new one, or a new one in place of the one it had before it went
// offline, whose event the kernel took off that CPU. A ring that cannot
// be opened is tried again at the next look.
func (f *Follower) syncCPUs() {
	cpus, err := perfring.OnlineCPUs("/sys")
	if err != nil {
		return
	}
	now := map[int]bool{}
	for _, cpu := range cpus {
		now[cpu] = true
		if !f.online[cpu] && f.addRing(cpu) != nil {
			now[cpu] = false
		}
	}
	f.online = now
}

// Lost is how many records the kernel dropped since Open because a ring
// was full: loads, unloads and ksymbols alike. The kernel reports a loss
// only when it next writes to that CPU's ring, so Lost can lag.
func (f *Follower) Lost() uint64 { return f.lost.Load() }

// JoinErr says why loads are joined through /proc only, or nil when the
// programs that say who loaded what are attached.
func (f *Follower) JoinErr() error { return f.joinErr }

// JoinedBy says how who loaded what is known: which programs write it
// (the fentry program, or the syscall tracepoints), "" where neither.
func (f *Follower) JoinedBy() string { return f.join.by }

// Close stops following and releases everything. Records not yet
// delivered are dropped.
func (f *Follower) Close() error {
	f.closeOnce.Do(func() {
		close(f.stop)
		<-f.done
		f.release()
	})
	return nil
}

func (f *Follower) release() {
	for _, r := range f.rings {
		r.Close()
	}
	f.rings, f.byCPU = nil, nil
	if f.watch != nil {
		f.watch.Close()
	}
	f.join.close()
}

// run reads the rings whenever one has a record, until Close: at the
// start, after each look at the CPUs, and at each wake-up.
func (f *Follower) run() {
	defer close(f.done)
	wait := time.NewTimer(f.cfg.cpuEvery)
	defer wait.Stop()
	// The looks at the CPUs keep the cadence, waking with the daemon's
	// ticks rather than at moments of their own.
	start := time.Now()
	nextCPUs := start.Add(cadence.Until(start, f.cfg.cpuEvery))
	for {
		if now := time.Now(); !now.Before(nextCPUs) {
			f.syncCPUs()
			f.join.sweep(monoNow() - uint64(staleAfter))
			nextCPUs = now.Add(cadence.Until(now, f.cfg.cpuEvery))
		}
		// Every ring is read at each wake-up, whichever woke the
		// watcher: it does not say which.
		f.readAt = monoNow()
		for _, r := range f.rings {
			r.read(f.take)
		}
		f.deliver()
		next := time.Until(nextCPUs)
		if len(f.held) > 0 {
			next = min(next, hold)
		}
		wait.Reset(max(next, 0))
		select {
		case <-f.stop:
			return
		case <-f.watch.Ready():
		case <-wait.C:
		}
	}
}

// take keeps a record read from a ring until deliver; a loss it counts
// at once.
func (f *Follower) take(r record) {
	if r.typ == unix.PERF_RECORD_LOST {
		f.lost.Add(r.lost)
		return
	}
	if !f.withID {
		r.time = f.readAt
	}
	f.held = append(f.held, r)
}

// deliver acts on held records in time order, those older than hold,
// until a load whose loader's entry is not in the map yet (for up to
// loadWait). Records read in one pass without a sample_id share a time:
// loads go before unloads then, so that a program loaded on one CPU and
// unloaded on another is not gone before it came.
func (f *Follower) deliver() {
	slices.SortStableFunc(f.held, func(a, b record) int {
		return cmp.Or(cmp.Compare(a.time, b.time), cmp.Compare(b2i(a.unload()), b2i(b.unload())))
	})
	now := monoNow()
	n := 0
	for n < len(f.held) && f.held[n].time <= now-uint64(hold) && f.act(&f.held[n], now) {
		n++
	}
	f.held = append(f.held[:0], f.held[n:]...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// act acts on r, or says false for a load to wait for: its loader's entry
// not in the map yet, and the record read less than loadWait ago.
func (f *Follower) act(r *record, now uint64) bool {
	switch {
	case r.progKsym():
		if len(f.ksyms) >= maxKsymTasks {
			clear(f.ksyms) // left behind by lost load records
		}
		if k := f.ksyms[f.ksymKey(r)]; len(k) < maxKsyms {
			f.ksyms[f.ksymKey(r)] = append(k, *r)
		}
	case r.codeKsym():
		if f.cfg.OnCode != nil {
			f.cfg.OnCode(r.ksym, r.unregister)
		}
	case r.typ == unix.PERF_RECORD_BPF_EVENT && r.event == unix.PERF_BPF_EVENT_PROG_LOAD:
		l := Load{
			ProgID: r.progID,
			Tag:    hex.EncodeToString(r.tag[:]),
			Time:   f.wallOf(r.time),
			PID:    int(r.pid),
			TID:    int(r.tid),
		}
		if f.join.attached() {
			if !f.join.fromMap(&l, f.wallOf) && now-r.time < uint64(loadWait) {
				return false
			}
		} else {
			f.join.fromProc(&l)
		}
		l.Ksyms = f.claimKsyms(f.ksymKey(r), l.Tag)
		if f.cfg.OnLoad != nil {
			f.cfg.OnLoad(l)
		}
	case r.unload():
		if f.cfg.OnUnload != nil {
			f.cfg.OnUnload(Unload{ProgID: r.progID, Tag: hex.EncodeToString(r.tag[:]), Time: f.wallOf(r.time)})
		}
	}
	return true
}

// ksymKey is what ties a program's ksymbols to its load record: the
// thread that made both, where the records say; else the CPU whose ring
// they came in, as the kernel makes them one after the other in the same
// call.
func (f *Follower) ksymKey(r *record) uint32 {
	if f.withID {
		return r.tid
	}
	return uint32(r.cpu)
}

// claimKsyms takes the ksymbols registered under key (see ksymKey) for
// the program with tag: the kernel makes them right before the load
// record, the main function's first ("bpf_prog_<the program's tag>_...";
// subprograms have tags of their own). Those before it were left by a
// load whose record was lost.
func (f *Follower) claimKsyms(key uint32, tag string) []Ksym {
	pending := f.ksyms[key]
	delete(f.ksyms, key)
	prefix := "bpf_prog_" + tag + "_"
	for i := len(pending) - 1; i >= 0; i-- {
		if strings.HasPrefix(pending[i].ksym.Name, prefix) {
			out := make([]Ksym, 0, len(pending)-i)
			for _, p := range pending[i:] {
				out = append(out, p.ksym)
			}
			return out
		}
	}
	return nil
}

func (f *Follower) wallOf(mono uint64) time.Time {
	return f.wall.Add(time.Duration(int64(mono - f.mono)))
}

func monoNow() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
