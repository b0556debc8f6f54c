package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultHostLock is the file a running bpfperfd holds locked, so that a
// second one on the host is refused: both would sample, profile and count
// the same programs, doubling what watching costs them. It sits beside
// the default socket, in the unit's RuntimeDirectory.
const DefaultHostLock = "/run/bpfperf/bpfperfd.lock"

// NoHostLock as Config.HostLock runs without the host-wide lock (several
// daemons on purpose, as tests do).
const NoHostLock = "none"

// hostLock holds the host-wide lock until release. The kernel drops the
// flock when the process ends, however it ends, so a killed daemon never
// leaves a stale lock behind; the file's text only names the holder.
type hostLock struct{ f *os.File }

func acquireHostLock(path, socket string) (*hostLock, error) {
	if path == "" || path == NoHostLock {
		return &hostLock{}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%w: host lock: %w", ErrBadConfig, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: host lock: %w", ErrBadConfig, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another one runs here (%s; lock %s), and two would watch the same programs twice (--host-lock none runs one more anyway)",
				ErrHostLocked, strings.TrimSpace(string(holder)), path)
		}
		return nil, fmt.Errorf("%w: host lock %s: %w", ErrBadConfig, path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "pid %d, socket %s\n", os.Getpid(), socket)
	return &hostLock{f: f}, nil
}

func (l *hostLock) release() {
	if l.f != nil {
		l.f.Close()
	}
}
