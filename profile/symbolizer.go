package profile

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/internal/transientfd"
	"github.com/bpfperf/bpfperf/profile/kfilter"
)

// SymbolizerConfig configures a Symbolizer.
type SymbolizerConfig struct {
	// ProcRoot defaults to /proc; kallsyms is read from ProcRoot/kallsyms.
	ProcRoot string
	// KallsymsMaxAge is how old the kallsyms cache may grow before an
	// address it cannot resolve makes it read kallsyms again; 0 means a
	// minute.
	KallsymsMaxAge time.Duration
	// Loaded, if set, lists the programs loaded now as the caller last
	// saw them (ok false where it cannot say), for Prune: a daemon that
	// sweeps every program each second knows, where walking the kernel's
	// program ids once a window took 10 ms of system calls a minute at
	// 1,000 idle programs (issue 46). A program it does not list yet is
	// not forgotten at once: Prune forgets at the second miss.
	Loaded func() (ids []uint32, ok bool)
}

// Symbolizer turns kernel addresses into functions and source lines.
//
// Kernel frames come from a cached copy of /proc/kallsyms. BPF frames come
// from each program's JIT information (JitedKsymAddrs, JitedFuncLens,
// FuncInfos, JitedLineInfos, LineInfos), which Learn reads while the
// program is loaded and keeps after it goes away, so samples taken before
// an unload still resolve. That information goes with the program, so it
// must be read before the program can go away, not when its samples are
// read: a Sampler has LearnNew learn each program when a capture starts or
// at the first drain after its load. kallsyms lists BPF programs too, but
// lags behind loads and unloads and has no lines; it is only the fallback.
//
// A Symbolizer is safe for concurrent use.
type Symbolizer struct {
	cfg SymbolizerConfig

	mu sync.RWMutex
	ks *kallsyms
	// ksErr is the last failed read of kallsyms, at ksErrAt: it is not
	// read again before KallsymsMaxAge, or every kernel frame of every
	// sample would read it again (a window then took minutes without
	// CAP_SYSLOG, and never ended).
	ksErr   error
	ksErrAt time.Time
	progs   map[uint32]*program
	index   []*function // every learned function, by start address
	maxLen  uint64
	unknown map[uint64]bool // addresses Observe already searched for
	newest  uint32          // the highest program id listed (LearnNew)
	retry   map[uint32]int  // ids whose reading failed, with their tries
	// gen counts the programs Learn learned, and changed is closed (and
	// replaced) at each: filtered captures give the kernel filter the new
	// code at once (Sampler).
	gen     uint64
	changed chan struct{}
	// fresh are the functions learned after generation freshFrom, each
	// with the generation that learned it: a filtered capture adds them
	// to its filter (rangesSince) instead of giving it every range again.
	fresh     []freshRange
	freshFrom uint64
	// trampolined are the programs of trampolineTypes (fentry, fexit,
	// LSM, extension, struct_ops; iterators too, which have none) learned
	// since kallsyms was last read, with when: kallsyms read before then
	// may lack their trampolines (reloadForTrampolines).
	trampolined map[uint32]time.Time
	// code is BPF JIT code of no program (trampolines, dispatchers) the
	// kernel's ksymbol records told of as it was made (AddCode), by
	// start: exact extents, known at once, where kallsyms is read again
	// only now and then.
	code []codeSym
	// trampolinesChecked is when reloadForTrampolines last looked at
	// the links of settled ones.
	trampolinesChecked time.Time
	// tracers are the learned programs of traceRunnerTypes (filter.go):
	// a filtered capture looks at them at each drain, and walking every
	// program (10,000 on a big host) each time cost more than the drain.
	tracers map[uint32]*program
}

// trampolineTypes attach through a trampoline, JIT code that kallsyms
// lists (bpf_trampoline_<key>) but no program's info does.
var trampolineTypes = map[ebpf.ProgramType]bool{ebpf.Tracing: true, ebpf.LSM: true, ebpf.Extension: true, ebpf.StructOps: true}

// changes returns the count of programs learned and a channel closed at
// the next.
func (s *Symbolizer) changes() (uint64, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen, s.changed
}

// freshRange is a function's code learned at generation gen.
type freshRange struct {
	gen uint64
	r   kfilter.Range
}

// maxFresh bounds the log of fresh functions where nothing prunes (a
// symbolizer without continuous windows): past it, captures take every
// range again.
const maxFresh = 1 << 14

// rangesSince returns the code of the functions learned after generation
// gen, and the generation now; ok is false where the log no longer
// reaches back to gen (Prune started it again): take codeRanges then.
func (s *Symbolizer) rangesSince(gen uint64) (rs []kfilter.Range, now uint64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if gen < s.freshFrom {
		return nil, s.gen, false
	}
	i, _ := slices.BinarySearchFunc(s.fresh, gen+1, func(f freshRange, g uint64) int { return cmp.Compare(f.gen, g) })
	for _, f := range s.fresh[i:] {
		rs = append(rs, f.r)
	}
	return rs, s.gen, true
}

// learnTries is how many times a program that cannot be read (an error
// other than its going away) is tried before only Observe looks for it.
const learnTries = 3

// program is what Learn keeps of a BPF program.
type program struct {
	id       uint32
	name     string
	tag      string
	loadTime uint64 // CLOCK_BOOTTIME ns
	typ      ebpf.ProgramType
	funcs    []*function
	strikes  int // Prune calls that found the program gone
}

// function is one JITed (sub)program.
type function struct {
	prog       *program
	start, end uint64
	name       string // the C function's name from BTF, else the program's
	systemName string // bpf_prog_<tag>_<name>, as kallsyms spells it
	file       string
	line       int64 // first line, 0 without BTF
	lines      []lineAddr
}

// lineAddr is where the JIT put the code of one source line.
type lineAddr struct {
	addr uint64
	file string
	line int64
}

// Frame is a symbolized address.
type Frame struct {
	Addr       uint64
	Func       string // function name; "" if unknown
	SystemName string // for BPF functions, the kallsyms name
	File       string // source file, for BPF programs built with BTF
	Line       int64
	Module     string // "" for the core kernel, "bpf" for BPF code, or a module

	// For BPF frames, the program the address belongs to.
	ProgID   uint32
	ProgName string
	ProgTag  string
}

// BPF reports whether the frame is in a JITed BPF program.
func (f Frame) BPF() bool { return f.ProgID != 0 || f.Module == "bpf" }

// NewSymbolizer returns a Symbolizer that knows no program yet.
func NewSymbolizer(cfg SymbolizerConfig) *Symbolizer {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.KallsymsMaxAge == 0 {
		cfg.KallsymsMaxAge = time.Minute
	}
	return &Symbolizer{cfg: cfg, progs: map[uint32]*program{}, unknown: map[uint64]bool{}, retry: map[uint32]int{}, changed: make(chan struct{})}
}

// LoadKallsyms reads kallsyms again. Lookups read it on first use.
func (s *Symbolizer) LoadKallsyms() error {
	started := time.Now()
	ks, err := readKallsyms(filepath.Join(s.cfg.ProcRoot, "kallsyms"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.ksErr, s.ksErrAt = err, time.Now()
		return err
	}
	s.ks, s.ksErr = ks, nil
	for id, at := range s.trampolined {
		if at.Before(started) {
			delete(s.trampolined, id) // its trampoline, if attached, is in
		}
	}
	return nil
}

// KallsymsErr is why kallsyms could not be read last time it was
// (ErrAddressesHidden, say); nil once it was.
func (s *Symbolizer) KallsymsErr() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ksErr
}

func (s *Symbolizer) kallsyms() (*kallsyms, error) {
	s.mu.RLock()
	ks, kerr, at := s.ks, s.ksErr, s.ksErrAt
	s.mu.RUnlock()
	if ks != nil {
		return ks, nil
	}
	if kerr != nil && time.Since(at) < s.cfg.KallsymsMaxAge {
		return nil, kerr
	}
	if err := s.LoadKallsyms(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ks, nil
}

// Learn reads and caches the symbols of the program with this id: it opens
// the program by id, reads its info and closes it at once. Learning a known
// program again does nothing. Call it when a program id first appears.
// Needs CAP_SYS_ADMIN (getting a program by id, and reading its BTF).
func (s *Symbolizer) Learn(id uint32) error {
	s.mu.RLock()
	_, known := s.progs[id]
	s.mu.RUnlock()
	if known {
		return nil
	}
	p, err := readProgram(id)
	if err != nil {
		return err
	}
	s.add(p)
	return nil
}

// add keeps what Learn read of program p, unless it is known already.
func (s *Symbolizer) add(p *program) {
	id := p.id
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.progs[id]; known {
		return
	}
	s.progs[id] = p
	for _, f := range p.funcs {
		s.index = append(s.index, f)
		s.maxLen = max(s.maxLen, f.end-f.start)
	}
	slices.SortFunc(s.index, func(a, b *function) int { return cmp.Compare(a.start, b.start) })
	clear(s.unknown)
	rs := make([]kfilter.Range, len(p.funcs))
	for i, f := range p.funcs {
		rs[i] = kfilter.Range{Start: f.start, End: f.end}
	}
	s.learnedLocked(rs)
	if trampolineTypes[p.typ] {
		if s.trampolined == nil {
			s.trampolined = map[uint32]time.Time{}
		}
		s.trampolined[id] = time.Now()
	}
	if traceRunnerTypes[p.typ] {
		if s.tracers == nil {
			s.tracers = map[uint32]*program{}
		}
		s.tracers[id] = p
	}
}

// learnedLocked starts a new generation for code just learned (a
// program's functions, a trampoline): its ranges go to the log a filtered
// capture adds from, and those waiting on changed are woken. Called with
// s.mu held.
func (s *Symbolizer) learnedLocked(rs []kfilter.Range) {
	s.gen++
	if len(s.fresh)+len(rs) > maxFresh {
		s.fresh, s.freshFrom = s.fresh[:0], s.gen
	} else {
		for _, r := range rs {
			s.fresh = append(s.fresh, freshRange{gen: s.gen, r: r})
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// LearnAll learns every loaded program it does not know yet and returns how
// many it learned. Programs that go away meanwhile are skipped; one that
// cannot be read does not keep the rest from being learned, and the first
// such error is returned.
func (s *Symbolizer) LearnAll() (int, error) {
	ids, err := loadedIDs()
	if err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		// The highest id loaded, not the highest ever seen: once ids
		// wrap around, LearnNew finds the new ones again.
		s.mu.Lock()
		s.newest = ids[len(ids)-1]
		s.mu.Unlock()
	}
	return s.learn(ids)
}

// LearnNew learns the programs loaded since the newest one it or LearnAll
// listed, and tries again those that could not be read then. Program ids
// grow with each load, so when nothing is new this is one system call: the
// Sampler calls it when a capture starts and at each drain, so that a
// program is learned within a drain of its load, while it is surely still
// loaded, rather than when its first samples are drained, maybe after it
// went away (it then resolved only through kallsyms, without lines, or not
// at all). A program loaded and unloaded between two drains can still be
// missed. The first call lists every loaded program.
func (s *Symbolizer) LearnNew() (int, error) {
	s.mu.RLock()
	id := s.newest
	var ids []uint32
	for r := range s.retry {
		ids = append(ids, r)
	}
	s.mu.RUnlock()
	var first error
	for {
		next, err := ebpf.ProgramGetNextID(ebpf.ProgramID(id))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			first = fmt.Errorf("next program id: %w", err)
			break
		}
		id = uint32(next)
		ids = append(ids, id)
	}
	s.mu.Lock()
	s.newest = max(s.newest, id)
	s.mu.Unlock()
	n, err := s.learn(ids)
	return n, cmp.Or(first, err)
}

// learn learns the programs with these ids it does not know yet, keeping
// those that could not be read for LearnNew to try again.
func (s *Symbolizer) learn(ids []uint32) (int, error) {
	n := 0
	var first error
	for _, id := range ids {
		s.mu.RLock()
		_, known := s.progs[id]
		s.mu.RUnlock()
		if known {
			continue
		}
		err := s.Learn(id)
		s.mu.Lock()
		if err == nil || errors.Is(err, os.ErrNotExist) || s.retry[id]+1 >= learnTries {
			delete(s.retry, id)
		} else {
			s.retry[id]++
		}
		s.mu.Unlock()
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) && first == nil {
				first = err
			}
			continue
		}
		n++
	}
	return n, first
}

// Prune forgets programs that are no longer loaded and were already gone
// at the previous Prune, and returns how many it forgot. Calling it once
// per capture window keeps a program that was unloaded during a window
// until that window has been built.
func (s *Symbolizer) Prune() (int, error) {
	var ids []uint32
	ok := false
	if s.cfg.Loaded != nil {
		ids, ok = s.cfg.Loaded()
	}
	if !ok {
		var err error
		if ids, err = loadedIDs(); err != nil {
			return 0, err
		}
	}
	loaded := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		loaded[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, p := range s.progs {
		if loaded[id] {
			p.strikes = 0
			continue
		}
		p.strikes++
		if p.strikes >= 2 {
			delete(s.progs, id)
			delete(s.tracers, id)
			n++
		}
	}
	// The log of fresh functions starts again once a window: a capture
	// that began before takes every range again (rangesSince).
	s.fresh, s.freshFrom = s.fresh[:0], s.gen
	if n > 0 {
		s.index = slices.DeleteFunc(s.index, func(f *function) bool { return s.progs[f.prog.id] != f.prog })
	}
	return n, nil
}

// Programs returns the ids of the programs the symbolizer knows.
func (s *Symbolizer) Programs() []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]uint32, 0, len(s.progs))
	for id := range s.progs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func loadedIDs() ([]uint32, error) {
	var ids []uint32
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids, nil
		}
		if err != nil {
			return ids, fmt.Errorf("next program id: %w", err)
		}
		ids = append(ids, uint32(next))
		id = next
	}
}

// Observe learns the programs behind BPF-looking addresses in stacks that
// no learned program covers. The Sampler calls it with each new stack while
// a capture runs; an address is searched for once.
func (s *Symbolizer) Observe(stacks [][]uint64) {
	ks, err := s.kallsyms()
	if err != nil {
		return
	}
	var searched []uint64
	s.mu.Lock()
	for _, st := range stacks {
		for _, a := range st {
			if ks.inText(a) || s.unknown[a] || s.findLocked(a, 0) != nil {
				continue
			}
			s.unknown[a] = true
			searched = append(searched, a)
		}
	}
	s.mu.Unlock()
	if len(searched) == 0 {
		return
	}
	if _, err := s.LearnAll(); err != nil {
		// Some program could not be read this time: the addresses are
		// searched for again at the next drain, not given up on (a
		// program given up on resolves only through kallsyms, without
		// its lines, and not at all once unloaded).
		s.mu.Lock()
		for _, a := range searched {
			delete(s.unknown, a)
		}
		s.mu.Unlock()
	}
}

// findLocked returns the learned function containing addr. Where JIT
// addresses were reused, it picks the newest program loaded before time t
// (CLOCK_BOOTTIME ns; 0 means any).
func (s *Symbolizer) findLocked(addr, t uint64) *function {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].start > addr })
	var best *function
	for j := i - 1; j >= 0 && addr-s.index[j].start < s.maxLen; j-- {
		f := s.index[j]
		if addr >= f.end {
			continue
		}
		if t != 0 && f.prog.loadTime > t {
			continue
		}
		if best == nil || f.prog.loadTime > best.prog.loadTime {
			best = f
		}
	}
	return best
}

// Lookup symbolizes addr, seen at time t (CLOCK_BOOTTIME ns, 0 if
// unknown). For a return address (a caller's frame) pass addr-1 to get the
// line of the call.
func (s *Symbolizer) Lookup(addr, t uint64) Frame {
	fr := Frame{Addr: addr}
	s.mu.RLock()
	f := s.findLocked(addr, t)
	s.mu.RUnlock()
	if f != nil {
		fr.Func, fr.SystemName, fr.Module = f.name, f.systemName, "bpf"
		fr.ProgID, fr.ProgName, fr.ProgTag = f.prog.id, f.prog.name, f.prog.tag
		fr.File, fr.Line = f.file, f.line
		if i := sort.Search(len(f.lines), func(i int) bool { return f.lines[i].addr > addr }); i > 0 {
			fr.File, fr.Line = f.lines[i-1].file, f.lines[i-1].line
		}
		return fr
	}
	if c, ok := s.codeAt(addr); ok {
		fr.Func, fr.SystemName, fr.Module = c.name, c.name, "bpf"
		return fr
	}
	ks, err := s.kallsyms()
	if err != nil {
		return fr
	}
	name, mod, _, ok := s.kallsymsLookup(ks, addr)
	if !ok && time.Since(ks.loaded) > s.cfg.KallsymsMaxAge {
		if s.LoadKallsyms() == nil {
			ks, _ = s.kallsyms()
			name, mod, _, ok = s.kallsymsLookup(ks, addr)
		}
	}
	if ok {
		fr.Func, fr.Module = name, mod
		if mod == "bpf" {
			// A program Learn never saw: kallsyms still names its tag
			// and function, bpf_prog_<tag>_<func>.
			fr.SystemName = name
			if rest, ok := strings.CutPrefix(name, "bpf_prog_"); ok && len(rest) > 17 && rest[16] == '_' {
				fr.ProgTag, fr.ProgName = rest[:16], rest[17:]
			}
		}
	}
	return fr
}

// readProgram reads what symbolization needs from a loaded program.
func readProgram(id uint32) (*program, error) {
	// A brief hold: kept out of the daemon's scans of who holds what.
	transientfd.Open()
	defer transientfd.Done()
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("get program %d by id: %w", id, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("program %d info: %w", id, err)
	}
	p := &program{id: id, name: info.Name, tag: info.Tag, typ: info.Type}
	if lt, ok := info.LoadTime(); ok {
		p.loadTime = uint64(lt)
	}
	addrs, _ := info.JitedKsymAddrs()
	lens, _ := info.JitedFuncLens()
	if len(addrs) == 0 || len(lens) != len(addrs) {
		return p, nil // not JITed, or addresses hidden: nothing to find
	}
	// With BTF, FuncInfos names each subprogram and LineInfos (paired
	// one to one with JitedLineInfos) maps code to source lines. Read
	// them now: they need the program's BTF, which goes with the program.
	funcs, _ := info.FuncInfos()
	if len(funcs) != len(addrs) {
		funcs = nil
	}
	lines, _ := info.LineInfos()
	jlines, _ := info.JitedLineInfos()
	if len(lines) != len(jlines) {
		lines, jlines = nil, nil
	}
	for i, a := range addrs {
		f := &function{prog: p, start: uint64(a), end: uint64(a) + uint64(lens[i]), name: p.name}
		switch {
		case funcs != nil:
			f.name = funcs[i].Func.Name
		case i > 0:
			f.name = "F" // the kernel's name for a subprogram without BTF
		}
		f.systemName = "bpf_prog_" + p.tag + "_" + f.name
		for j, l := range lines {
			addr := jlines[j]
			if addr < f.start || addr >= f.end {
				continue
			}
			la := lineAddr{addr: addr, file: l.Line.FileName(), line: int64(l.Line.LineNumber())}
			if funcs != nil && l.Offset == funcs[i].Offset {
				f.file, f.line = la.file, la.line
			}
			f.lines = append(f.lines, la)
		}
		slices.SortStableFunc(f.lines, func(a, b lineAddr) int { return cmp.Compare(a.addr, b.addr) })
		if f.file == "" && len(f.lines) > 0 {
			f.file, f.line = f.lines[0].file, f.lines[0].line
		}
		p.funcs = append(p.funcs, f)
	}
	return p, nil
}

// overlaps reports whether two learned functions share addresses: the JIT
// reused the memory of an unloaded program, and a sample's time decides
// which program an address belongs to.
func (s *Symbolizer) overlaps() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var end uint64
	for _, f := range s.index {
		if f.start < end {
			return true
		}
		end = max(end, f.end)
	}
	return false
}

// funcStart returns the first source line of the BPF function of f.
func (s *Symbolizer) funcStart(f Frame) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.progs[f.ProgID]
	if p == nil {
		return 0, false
	}
	for _, fn := range p.funcs {
		if fn.name == f.Func {
			return fn.line, fn.line != 0
		}
	}
	return 0, false
}
