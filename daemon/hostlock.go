package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// acquireHostLock takes the host-wide lock at path. Held by another
// daemon, it is waited for up to wait (0: not at all), with one line in
// the log saying so: a new pod in an upgrade may start while the old one
// still stops, and should start the moment it has gone rather than exit
// and wait out a restart back-off. ctx ending stops the wait.
func acquireHostLock(ctx context.Context, path, socket string, wait time.Duration, log *slog.Logger) (*hostLock, error) {
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
	start := time.Now()
	waiting := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("%w: host lock %s: %w", ErrBadConfig, path, err)
		}
		holder, _ := os.ReadFile(path)
		if time.Since(start) >= wait {
			f.Close()
			waited := ""
			if wait > 0 {
				waited = fmt.Sprintf(", waited %v", wait)
			}
			return nil, fmt.Errorf("%w: another one runs here (%s; lock %s%s), and two would watch the same programs twice (--host-lock none runs one more anyway)",
				ErrHostLocked, strings.TrimSpace(string(holder)), path, waited)
		}
		if !waiting {
			log.Warn("waiting for the host lock: another bpfperfd runs here", "holder", strings.TrimSpace(string(holder)), "lock", path, "wait", wait)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(hostLockPoll):
		}
	}
	if waiting {
		log.Info("host lock taken", "lock", path, "waited", time.Since(start).Round(time.Millisecond))
	}
	f.Truncate(0)
	fmt.Fprintf(f, "pid %d, socket %s\n", os.Getpid(), socket)
	return &hostLock{f: f}, nil
}

// hostLockPoll is how often a waiting daemon tries the lock again: the
// start that follows the old daemon's end is that much late at most.
const hostLockPoll = 200 * time.Millisecond

func (l *hostLock) release() {
	if l.f != nil {
		l.f.Close()
	}
}
