// Package loaders knows who loaded each program: it follows the kernel's
// load records (collectors/loadrec) while the daemon runs and keeps, for
// each program loaded meanwhile, the process that made the BPF_PROG_LOAD:
// its pid, command and cgroup, hence its systemd unit or container. Those
// are facts of the moment of loading, unlike whoever holds the program
// later (a passer-by that opened it, a loader that exited and left it
// pinned), and they are what the sampler's identities are made of first.
//
// Programs loaded before the daemon started, or whose record the kernel
// dropped, have no loader here: the sampler falls back to what holds them
// (internal/identity says the rule). Lost says how many records were
// dropped, so status can tell a host where loaders are partly unknown.
package loaders

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/collectors/loadrec"
	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/evict"
)

// maxPending bounds the loaders kept for programs the sampler has not
// taken yet: a burst of loads between two sweeps, most of them taken at
// the next. Past it the oldest are dropped (those programs get a runner
// from their holders, as on a host without load records).
const maxPending = 16384

// Loaders follows program loads. The zero value knows no loader; Close it.
type Loaders struct {
	follower *loadrec.Follower
	cgroups  *cgroupid.Resolver
	procRoot string
	log      *slog.Logger
	// pods names a loader's container by its pod (nil: by ids only).
	pods PodNamer

	mu      sync.Mutex
	pending map[uint32]collectors.Loader // by program id, until taken or unloaded
	seen    uint64                       // loads recorded since Start
	// onLoad, once set, is told of each load as its record arrives;
	// onCode of each trampoline and dispatcher made and freed.
	onLoad func(id uint32)
	onCode func(k loadrec.Ksym, gone bool)
}

// PodNamer names the pod of a container's cgroup from what it has at
// hand, never waiting for the runtime (daemon/podnames): asked as the load
// record arrives, it looks the container up while it surely exists.
type PodNamer interface {
	Lookup(cgroup string) (pod *collectors.Pod, pending bool)
}

// OnLoad has fn told of each program load as its record arrives, on the
// follower's goroutine (fn must not block): the profiler learns a
// program's JIT images and lines then, while it is surely loaded, where
// the next sweep or capture drain may come after it went.
func (l *Loaders) OnLoad(fn func(id uint32)) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onLoad = fn
}

// OnCode has fn told of BPF JIT code of no program (trampolines,
// dispatchers) as the kernel makes (gone false) and frees it, on the
// follower's goroutine (fn must not block): the profiler names a
// trampoline just attached from its first sample on.
func (l *Loaders) OnCode(fn func(k loadrec.Ksym, gone bool)) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onCode = fn
}

// code passes a code ksymbol on to onCode.
func (l *Loaders) code(k loadrec.Ksym, gone bool) {
	l.mu.Lock()
	notify := l.onCode
	l.mu.Unlock()
	if notify != nil {
		notify(k, gone)
	}
}

// Start follows loads from now on. A kernel that refuses the records
// (before 5.1, no perf_event_open) leaves loaders unknown: the error says
// why, and the daemon runs on without them. pods names the pods of loaders
// in containers (nil: they go by ids).
func Start(procRoot string, log *slog.Logger, pods PodNamer) (*Loaders, error) {
	l := &Loaders{procRoot: procRoot, log: log, pods: pods, pending: map[uint32]collectors.Loader{}}
	if r, err := cgroupid.New(filepath.Join(procRoot, "self/mountinfo")); err == nil {
		l.cgroups = r
	}
	f, err := loadrec.Open(loadrec.Config{ProcRoot: procRoot, OnLoad: l.loaded, OnUnload: l.unloaded, OnCode: l.code})
	if err != nil {
		return nil, err
	}
	if jerr := f.JoinErr(); jerr != nil {
		log.Warn("loaders: commands and cgroups read from /proc only, so a loader that exits at once stays unknown", "why", jerr)
	} else {
		log.Info("loaders: who loaded each program is kept", "by", f.JoinedBy())
	}
	l.follower = f
	return l, nil
}

// loaded keeps a load's loader until the sampler takes it. It runs on the
// follower's goroutine, as the record arrives: the loader's cgroup is
// named now, while it likely still exists. A record that names no loader
// (its entry refused by a full map in a burst that overflowed the rings,
// or a load no program of the follower saw) keeps none: its runner comes
// from its holders, as for a record lost.
func (l *Loaders) loaded(ld loadrec.Load) {
	known := ld.Source != loadrec.SourceNone || ld.PID != 0
	var lo collectors.Loader
	if known {
		lo = l.loaderOf(ld)
	}
	l.mu.Lock()
	l.seen++
	if known {
		if len(l.pending) >= maxPending {
			l.dropOldest()
		}
		l.pending[ld.ProgID] = lo
	}
	notify := l.onLoad
	l.mu.Unlock()
	if notify != nil {
		notify(ld.ProgID)
	}
}

// loaderOf is the loader a load record names, its cgroup, unit,
// container and pod named as far as they can be now.
func (l *Loaders) loaderOf(ld loadrec.Load) collectors.Loader {
	lo := collectors.Loader{PID: ld.PID, TID: ld.TID, Comm: ld.Comm, CgroupID: ld.CgroupID, At: ld.Time, Source: "load record, " + ld.Source.String()}
	lo.Cgroup = l.cgroupOf(ld)
	named := lo.Cgroup
	if named == "" {
		// The cgroup is gone (a oneshot unit's, removed as its loader
		// exited): its last two names, which the record's join kept,
		// still name the unit or container.
		named = ld.CgroupTail
	}
	lo.Unit, lo.Container = collectors.UnitAndContainer(named)
	if lo.Container != "" && l.pods != nil {
		// Usually not known yet (a new container): this asks, and the
		// sampler looks again before the identity settles.
		lo.Pod, _ = l.pods.Lookup(named)
	}
	return lo
}

// dropOldest makes room: the quarter recorded first goes. Called with mu
// held, only when the bound is reached.
func (l *Loaders) dropOldest() {
	evict.OldestQuarter(l.pending, func(lo collectors.Loader) time.Time { return lo.At })
}

// cgroupOf names the loader's cgroup: its cgroup id through the cgroup2
// mount (a cached path, else its file handle), else, where the record's
// join found no id, /proc while the loader lives.
func (l *Loaders) cgroupOf(ld loadrec.Load) string {
	if l.cgroups != nil && ld.CgroupID != 0 {
		if p, ok := l.cgroups.Path(ld.CgroupID); ok {
			return p
		}
	}
	if ld.PID > 0 {
		if b, err := os.ReadFile(filepath.Join(l.procRoot, strconv.Itoa(ld.PID), "cgroup")); err == nil {
			return collectors.CgroupPath(string(b))
		}
	}
	return ""
}

// unloaded forgets a program that went before the sampler took it.
func (l *Loaders) unloaded(u loadrec.Unload) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, u.ProgID)
}

// Take hands over the loader of program id, if its load was recorded;
// the sampler keeps it from then on, in the program's metadata.
func (l *Loaders) Take(id uint32) (collectors.Loader, bool) {
	if l == nil {
		return collectors.Loader{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lo, ok := l.pending[id]
	delete(l.pending, id)
	if ok && lo.Cgroup == "" && lo.CgroupID != 0 && l.cgroups != nil {
		// Not named when the record came (its file handle would not
		// open, and a walk was not due): a tick later one may be.
		if p, found := l.cgroups.Path(lo.CgroupID); found {
			lo.Cgroup = p
			lo.Unit, lo.Container = collectors.UnitAndContainer(p)
		}
	}
	return lo, ok
}

// Status says whether loads are followed and what was lost, for status.
func (l *Loaders) Status() string {
	if l == nil || l.follower == nil {
		return "off"
	}
	l.mu.Lock()
	seen := l.seen
	l.mu.Unlock()
	s := "following the kernel's load records: " + strconv.FormatUint(seen, 10) + " loads"
	if lost := l.follower.Lost(); lost > 0 {
		s += ", " + strconv.FormatUint(lost, 10) + " records lost (their programs' runners come from their holders)"
	}
	if err := l.follower.JoinErr(); err != nil {
		s += "; commands from /proc only: " + strings.TrimSpace(err.Error())
	} else {
		s += "; loaders kept by " + l.follower.JoinedBy()
	}
	return s
}

// Close stops following.
func (l *Loaders) Close() error {
	if l == nil || l.follower == nil {
		return nil
	}
	return l.follower.Close()
}
