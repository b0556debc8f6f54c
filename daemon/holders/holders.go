// Package holders answers who holds which BPF programs and maps, for the
// daemon's owners scan (daemon/sampler) and its map watcher.
package holders

import (
	"log/slog"
	"sync"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/transientfd"
)

// Scanner answers who holds which programs and maps: one pass of the holders iterator
// where the kernel runs it and --proc-root is the host's /proc, else a
// walk of every process's fds (collectors.ScanHolders), 17x slower with
// 10,000 BPF fds open (BenchmarkHolders). It holds the iterator's program
// and link, the daemon's own, as the sweep does.
type Scanner struct {
	procRoot string
	log      *slog.Logger

	mu   sync.Mutex
	iter *collectors.HolderIter
	how  string // for status: "iterator" or why the walk
}

// New reads holders of the processes under procRoot (usually /proc).
func New(procRoot string, log *slog.Logger) *Scanner {
	h := &Scanner{procRoot: procRoot, log: log, how: "iterator (iter/task_file)"}
	if procRoot != "/proc" {
		// The iterator sees the kernel's processes, not a copy's.
		h.how = "/proc walk: --proc-root is " + procRoot
		return h
	}
	it, err := collectors.NewHolderIter()
	if err != nil {
		h.how = "/proc walk: " + err.Error()
		h.log.Info("owners and map holders read by walking /proc", "why", err)
		return h
	}
	h.iter = it
	return h
}

// Scan reads every holder now. An iterator that fails (or finds pids that
// are not /proc's) is dropped for good, with one log line.
func (h *Scanner) Scan() (hs collectors.Holders, err error) {
	// While no brief fd of the daemon's own is open: one would show the
	// daemon as a holder of a program it only read.
	transientfd.Scan(func() { hs, err = h.scanNow() })
	return hs, err
}

func (h *Scanner) scanNow() (collectors.Holders, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.iter != nil {
		hs, err := h.iter.Scan(h.procRoot)
		if err == nil {
			return hs, nil
		}
		h.log.Warn("holders iterator off, walking /proc from now on", "why", err)
		h.how = "/proc walk: " + err.Error()
		h.iter.Close()
		h.iter = nil
	}
	return collectors.ScanHolders(h.procRoot)
}

// State says how holders are read, in words.
func (h *Scanner) State() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.how
}

// Close drops the iterator.
func (h *Scanner) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.iter != nil {
		h.iter.Close()
		h.iter = nil
	}
}
