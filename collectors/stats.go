package collectors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// StatsMode says how run-time stats were turned on.
type StatsMode string

const (
	StatsFD     StatsMode = "fd"     // BPF_ENABLE_STATS fd held by us; kernel drops it if we die
	StatsSysctl StatsMode = "sysctl" // kernel.bpf_stats_enabled written by us (or found already 1)
)

// StatsConfig chooses how EnableStats turns stats on.
type StatsConfig struct {
	ProcRoot string // "/proc"; sysctl at <ProcRoot>/sys/kernel/bpf_stats_enabled
	Mode     string // "auto" (fd, falling back to sysctl only if the fd call fails), "fd", "sysctl"
}

// Stats keeps kernel BPF run-time stats on until Restore.
type Stats struct {
	mode   StatsMode
	sysctl string

	mu       sync.Mutex
	fd       int    // stats fd, -1 once closed or in sysctl mode
	wrote    bool   // we changed the sysctl from 0 to 1
	restored bool   // Restore ran
	fdErr    error  // why auto mode fell back to the sysctl
	fdSysctl string // the sysctl as read in fd mode, for Detail

	// The time our stats fd was open, for a duty cycle (Pause, Resume):
	// onBefore until the last Pause, and since onSince while open.
	onSince  time.Time
	onBefore time.Duration
	// switches are how long the last few enables and closes took: the
	// kernel patches its static key on every CPU (about 10 ms on 2 vCPUs
	// here), and stats start or stop counting somewhere in that time.
	switches [8]time.Duration
	nSwitch  int
}

// EnableStats turns run-time stats on. In sysctl mode it writes 1 only if it
// read 0, and remembers what it found so Restore puts it back. The fd needs
// Linux 5.8 and CAP_SYS_ADMIN; the sysctl needs a writable /proc/sys.
func EnableStats(cfg StatsConfig) (*Stats, error) {
	root := cfg.ProcRoot
	if root == "" {
		root = "/proc"
	}
	s := &Stats{sysctl: filepath.Join(root, "sys/kernel/bpf_stats_enabled"), fd: -1}
	var err error
	switch cfg.Mode {
	case "fd":
		err = s.enableFD()
	case "sysctl":
		err = s.enableSysctl()
	case "auto", "":
		if s.fdErr = s.enableFD(); s.fdErr != nil {
			if err = s.enableSysctl(); err != nil {
				err = fmt.Errorf("%w (after %w)", err, s.fdErr)
			}
		}
	default:
		return nil, fmt.Errorf("stats mode %q: want auto, fd or sysctl", cfg.Mode)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stats) enableFD() error {
	attr := struct{ typ uint32 }{unix.BPF_STATS_RUN_TIME}
	fd, err := bpf(unix.BPF_ENABLE_STATS, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return wrapErrno("enable stats (BPF_ENABLE_STATS)", err)
	}
	s.mode, s.fd = StatsFD, int(fd)
	s.fdSysctl, _ = s.readSysctl()
	s.onSince = time.Now()
	return nil
}

// Pause closes the stats fd, so stats go off until Resume unless another
// holder (a stats fd, the sysctl) keeps them on: a duty cycle's off part.
// Fd mode only; a no-op when paused or restored.
func (s *Stats) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode != StatsFD || s.fd < 0 || s.restored {
		return nil
	}
	// Closing the fd takes ~10 ms here (the kernel patches its static
	// key and waits for every CPU), and stats stop counting somewhere in
	// it: the middle of the close is taken as the end of the on part.
	// Counted to the close's return, a 10% duty's rates read 5-9% low at
	// a 1 s interval (TestStatsDuty, CI 2026-11-27: -5.3%); to its start,
	// 6-9% high (three runs here). The enable is counted from its return,
	// where a loop run flat out beside it began to be counted (runs
	// counted over runs made, 15 parts of 100 ms: +1.7%).
	closing := time.Now()
	err := unix.Close(s.fd)
	took := time.Since(closing)
	s.fd = -1
	s.onBefore += closing.Add(took / 2).Sub(s.onSince)
	s.switched(took)
	s.onSince = time.Time{}
	if err != nil {
		return fmt.Errorf("close stats fd: %w", err)
	}
	return nil
}

// Resume opens a new stats fd after Pause; a no-op when open or restored.
func (s *Stats) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode != StatsFD || s.fd >= 0 || s.restored {
		return nil
	}
	attr := struct{ typ uint32 }{unix.BPF_STATS_RUN_TIME}
	enabling := time.Now()
	fd, err := bpf(unix.BPF_ENABLE_STATS, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return wrapErrno("enable stats (BPF_ENABLE_STATS)", err)
	}
	s.fd, s.onSince = int(fd), time.Now()
	s.switched(s.onSince.Sub(enabling))
	return nil
}

// switched keeps took, one enable's or close's time. The caller holds mu.
func (s *Stats) switched(took time.Duration) {
	s.switches[s.nSwitch%len(s.switches)] = took
	s.nSwitch++
}

// SwitchTime is the longest of the last few enables and closes of the
// stats fd (Pause, Resume): how long the blur at each end of an on part
// can be. 0 before the first.
func (s *Stats) SwitchTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var longest time.Duration
	for _, d := range s.switches[:min(s.nSwitch, len(s.switches))] {
		longest = max(longest, d)
	}
	return longest
}

// CreditOn adds d to the time stats were on: time another fd of the
// daemon's own held them on while ours was paused (measuring their cost).
func (s *Stats) CreditOn(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onBefore += d
}

// OnTime is how long our stats fd has been open in all, up to at: the
// time stats were surely on. In sysctl mode it is always on.
func (s *Stats) OnTime(at time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onSince.IsZero() || at.Before(s.onSince) {
		return s.onBefore
	}
	return s.onBefore + at.Sub(s.onSince)
}

func (s *Stats) enableSysctl() error {
	v, err := s.readSysctl()
	if err != nil {
		return err
	}
	s.mode = StatsSysctl
	if v == "1" {
		return nil
	}
	if err := os.WriteFile(s.sysctl, []byte("1\n"), 0); err != nil {
		return fmt.Errorf("enable stats: %w", permission(err))
	}
	s.wrote = true
	return nil
}

func (s *Stats) readSysctl() (string, error) {
	b, err := os.ReadFile(s.sysctl)
	if err != nil {
		return "", fmt.Errorf("read stats sysctl: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Mode reports how stats were turned on.
func (s *Stats) Mode() StatsMode { return s.mode }

// Detail says in a few words how stats are on and what Restore will do.
func (s *Stats) Detail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d string
	switch {
	case s.mode == StatsFD:
		d = "fd (BPF_ENABLE_STATS)"
		if s.fdSysctl == "1" {
			d += "; kernel.bpf_stats_enabled also reads 1"
		}
	case s.wrote:
		d = "sysctl (set 0 -> 1, restored on exit)"
	default:
		d = "sysctl (was already 1, left alone)"
	}
	if s.fdErr != nil {
		d += "; fd unavailable: " + s.fdErr.Error()
	}
	if s.restored {
		d += "; restored"
	}
	return d
}

// Restore closes the stats fd, or writes back the sysctl's original value
// if EnableStats changed it. It is idempotent.
func (s *Stats) Restore() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restored {
		return nil
	}
	s.restored = true
	if s.fd >= 0 {
		err := unix.Close(s.fd)
		s.fd = -1
		if err != nil {
			return fmt.Errorf("close stats fd: %w", err)
		}
	}
	if s.wrote {
		if err := os.WriteFile(s.sysctl, []byte("0\n"), 0); err != nil {
			return fmt.Errorf("restore stats sysctl to 0: %w", permission(err))
		}
	}
	return nil
}

// permission adds ErrNotPermitted to a refused sysctl write.
func permission(err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %w", err, ErrNotPermitted)
	}
	return err
}
