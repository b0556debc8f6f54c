package sampler

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
)

// The sweep modes of --sweep.
const (
	SweepAuto = "auto" // the iterator, else the fd sweep
	SweepIter = "iter" // the iterator; the daemon does not start without it
	SweepFd   = "fd"   // four system calls per program
)

const (
	// iterCheckEvery is how often the iterator's figures are proved
	// against OBJ_GET_INFO_BY_FD while it runs.
	iterCheckEvery = 5 * time.Minute
	// iterRecheckSoon is when a proof that found no idle program to
	// compare is tried again.
	iterRecheckSoon = 10 * time.Second
	// iterCheckSample is how many programs each proof reads by fd.
	iterCheckSample = 16
)

// errSimulatedIterFailure is what --debug.sweep-fail-load makes the
// iterator's load return.
var errSimulatedIterFailure = fmt.Errorf("%w: load failure simulated by --debug.sweep-fail-load", collectors.ErrIterUnsupported)

// maxNoTrailer is how many changed-only walks in a row may end without
// their trailer before the sweeper reads every program each tick instead.
const maxNoTrailer = 3

// Sweeper reads every program's counters each tick: with the iterator
// (collectors.ProgIter) where it runs and agrees with OBJ_GET_INFO_BY_FD,
// else with the per-program fd sweep (collectors.Sweep). Only the
// sampler's goroutine calls sweep; status reads under mu.
type Sweeper struct {
	log     *slog.Logger
	iter    *collectors.ProgIter
	checked time.Time // last proof against OBJ_GET_INFO_BY_FD
	// prove is the proof, iter.Check unless a test makes it disagree.
	prove func(n int) (int, error)
	// changedOnly: each tick reads only the programs that changed
	// (collectors.SweepChanged), unless the kernel cannot.
	changedOnly bool
	// changed is the changed-only sweep, iter.SweepChanged unless a test
	// makes it fail; noTrailer counts its walks in a row that ended
	// without a trailer.
	changed   func([]collectors.Sample, bool) ([]collectors.Sample, collectors.Walk, error)
	noTrailer int

	mu     sync.Mutex
	kind   string // SweepIter or SweepFd: what runs now
	detail string // why, in words
	// The iterator program's own run time (its bpf_stats): cumulative,
	// and the last sweep's share.
	costNs, lastCostNs uint64
	costSince          uint64 // the iterator's load time (ns since boot)
}

// SweepConfig is how programs are read each tick.
type SweepConfig struct {
	Mode string // SweepAuto, SweepIter or SweepFd
	// FailLoad makes the iterator's load fail, as on a kernel that
	// refuses it (--debug.sweep-fail-load: tests of the fallback).
	FailLoad bool
	Logger   *slog.Logger
}

// NewSweeper picks the sweep for mode. In auto mode a kernel that cannot
// run the iterator, or an iterator that disagrees with
// OBJ_GET_INFO_BY_FD, means the fd sweep, logged in one line; in iter mode
// it is an error.
func NewSweeper(cfg SweepConfig, now time.Time) (*Sweeper, error) {
	w := &Sweeper{log: cfg.Logger, kind: SweepFd}
	if cfg.Mode == SweepFd {
		w.detail = "--sweep fd"
		return w, nil
	}
	load := collectors.NewProgIter
	if cfg.FailLoad {
		load = func() (*collectors.ProgIter, error) { return nil, errSimulatedIterFailure }
	}
	it, err := load()
	if err == nil {
		w.iter, w.kind, w.prove, w.changedOnly, w.changed = it, SweepIter, it.Check, true, it.SweepChanged
		err = w.check(now)
	}
	if err != nil {
		if cfg.Mode == SweepIter {
			w.Close()
			return nil, fmt.Errorf("%w: --sweep iter: %w", errs.BadConfig, err)
		}
		w.fallBack(err)
	}
	return w, nil
}

// check proves the iterator against OBJ_GET_INFO_BY_FD.
func (w *Sweeper) check(now time.Time) error {
	w.checked = now
	n, err := w.prove(iterCheckSample)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 {
		// Nothing idle to compare yet (a host with every program busy, or
		// none): not a proof. Try again soon rather than in 5 minutes.
		w.checked = now.Add(iterRecheckSoon - iterCheckEvery)
		w.detail = fmt.Sprintf("iterator (iter/bpf_prog), not yet compared with OBJ_GET_INFO_BY_FD: no idle program at %s", now.UTC().Format(time.RFC3339))
		return nil
	}
	w.detail = fmt.Sprintf("iterator (iter/bpf_prog), %d idle programs equal to OBJ_GET_INFO_BY_FD at %s", n, now.UTC().Format(time.RFC3339))
	return nil
}

// fallBack switches to the fd sweep for good and says why.
func (w *Sweeper) fallBack(why error) {
	w.log.Warn("iterator sweep off, using the fd sweep", "why", why)
	if w.iter != nil {
		w.iter.Close()
		w.iter = nil
	}
	w.mu.Lock()
	w.kind, w.detail, w.lastCostNs = SweepFd, "fell back: "+why.Error(), 0
	w.mu.Unlock()
}

// sweep reads the programs into buf, proving the iterator again every
// iterCheckEvery. With the iterator and all false it reads only the
// programs that changed since its last sweep (collectors.SweepChanged)
// and returns the walk's trailer, which tells whether any went away;
// otherwise it reads every program and walk is nil.
func (w *Sweeper) sweep(buf []collectors.Sample, now time.Time, all bool) (out []collectors.Sample, walk *collectors.Walk, err error) {
	if w.iter != nil && now.Sub(w.checked) >= iterCheckEvery {
		if err := w.check(now); err != nil && !errors.Is(err, collectors.ErrNotPermitted) {
			w.fallBack(err)
		}
	}
	if w.iter == nil {
		out, err = collectors.Sweep(buf)
		return out, nil, err
	}
	start := len(buf)
	if w.changedOnly {
		var t collectors.Walk
		out, t, err = w.changed(buf, all)
		walk = &t
		switch {
		case errors.Is(err, collectors.ErrChangedUnsupported):
			w.log.Info("changed-only sweep off: every program is read each tick", "why", err)
			w.changedOnly, walk = false, nil
			out, err = w.iter.Sweep(buf[:start])
		case errors.Is(err, collectors.ErrNoTrailer):
			// One odd walk does not condemn the iterator (it used to: the
			// fd sweep for good, from one walk in CI). This tick reads
			// every program; only walks that keep failing turn the
			// changed-only sweep off, and the iterator stays.
			w.noTrailer++
			w.log.Warn("changed-only sweep incomplete: this tick reads every program", "why", err, "in_a_row", w.noTrailer)
			if w.noTrailer >= maxNoTrailer {
				w.log.Warn("changed-only sweep off: every program is read each tick", "why", fmt.Sprintf("%d walks in a row without a trailer", w.noTrailer))
				w.changedOnly = false
			}
			walk = nil
			out, err = w.iter.Sweep(buf[:start])
		case err == nil:
			w.noTrailer = 0
		}
	} else {
		out, err = w.iter.Sweep(buf)
	}
	if err != nil {
		w.fallBack(err)
		out, err = collectors.Sweep(buf[:start])
		return out, nil, err
	}
	for _, s := range out[start:] {
		if s.ID == w.iter.ProgramID() {
			w.mu.Lock()
			if w.costNs > 0 {
				w.lastCostNs = s.RunTimeNs - w.costNs
			}
			w.costNs, w.costSince = s.RunTimeNs, s.LoadTime
			w.mu.Unlock()
			break
		}
	}
	return out, walk, nil
}

// IterID is the iterator program's id, or 0 when the fd sweep runs.
func (w *Sweeper) IterID() uint32 {
	if w == nil || w.iter == nil {
		return 0
	}
	return w.iter.ProgramID()
}

// State is what status shows: the sweep, why, and the iterator's own
// run time, the last sweep's and in all since it loaded.
func (w *Sweeper) State() (kind, detail string, lastCostNs, costNs, since uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kind, w.detail, w.lastCostNs, w.costNs, w.costSince
}

// Close drops the iterator.
func (w *Sweeper) Close() {
	if w.iter != nil {
		w.iter.Close()
		w.iter = nil
	}
}
