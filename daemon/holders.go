package daemon

import (
	"log/slog"
	"sync"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/transientfd"
)

// holderScanner answers who holds which programs and maps, for the owners
// scan (sampler) and the map watcher: one pass of the holders iterator
// where the kernel runs it and --proc-root is the host's /proc, else a
// walk of every process's fds (collectors.ScanHolders), 17x slower with
// 10,000 BPF fds open (BenchmarkHolders). It holds the iterator's program
// and link, the daemon's own, as the sweep does.
type holderScanner struct {
	procRoot string
	log      *slog.Logger

	mu   sync.Mutex
	iter *collectors.HolderIter
	how  string // for status: "iterator" or why the walk
}

func newHolderScanner(cfg *Config) *holderScanner {
	h := &holderScanner{procRoot: cfg.ProcRoot, log: cfg.Logger, how: "iterator (iter/task_file)"}
	if cfg.ProcRoot != "/proc" {
		// The iterator sees the kernel's processes, not a copy's.
		h.how = "/proc walk: --proc-root is " + cfg.ProcRoot
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

// scan reads every holder now. An iterator that fails (or finds pids that
// are not /proc's) is dropped for good, with one log line.
func (h *holderScanner) scan() (hs collectors.Holders, err error) {
	// While no brief fd of the daemon's own is open: one would show the
	// daemon as a holder of a program it only read.
	transientfd.Scan(func() { hs, err = h.scanNow() })
	return hs, err
}

func (h *holderScanner) scanNow() (collectors.Holders, error) {
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

// state says how holders are read, in words.
func (h *holderScanner) state() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.how
}

func (h *holderScanner) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.iter != nil {
		h.iter.Close()
		h.iter = nil
	}
}
