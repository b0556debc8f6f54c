package perfring

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher says when a ring holds more than its wake-up watermark (by
// default half the ring), so a reader that has nothing else to do waits
// for that instead of waking on a timer to find the rings nearly empty.
//
// A ring's readiness is a one-shot flag, not a level: perf_poll clears
// it as it reports it, so a poll whose answer is thrown away loses that
// wake-up for good, and a ring at a half-ring watermark then fills
// without a word. So each ring's fd goes straight into Go's own poller,
// the only thing that ever polls it, and one goroutine a ring waits on
// it for the watcher's life and says Ready at each wake-up. (An epoll
// instance of the rings in Go's poller lost wake-ups: Go's check of the
// instance polls the rings, and Go forgets a file's readiness at each
// new Read. A thread blocked in epoll_wait loses none, but keeps Go's
// monitor thread polling for 10 ms each time it goes back to wait.)
type Watcher struct {
	mu    sync.Mutex
	files map[*Ring]*os.File // a dup of each ring's fd, in Go's poller
	ready chan struct{}
	done  sync.WaitGroup
}

// Watch watches the rings' events (their fds stay the caller's).
func Watch(rings []*Ring) (*Watcher, error) {
	w := &Watcher{files: map[*Ring]*os.File{}, ready: make(chan struct{}, 1)}
	for _, r := range rings {
		if err := w.Add(r); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// Add watches one more ring, opened after Watch. It returns once Go's
// poller watches the ring: a record written after that wakes Ready, and
// one written before, the caller's next drain finds.
func (w *Watcher) Add(r *Ring) error {
	fd, err := unix.FcntlInt(uintptr(r.FD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("watch ring on cpu %d: %w", r.CPU, err)
	}
	// Non-blocking, so os.NewFile puts it in Go's poller (the flag is
	// the event's, shared with r.FD, which is only mapped, never read).
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("watch ring on cpu %d: %w", r.CPU, err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("perf ring of cpu %d", r.CPU))
	conn, err := f.SyscallConn()
	// A file Go could not put in its poller takes no deadline; Read
	// would then return at once, and the ring go unwatched.
	if err == nil && f.SetReadDeadline(time.Time{}) != nil {
		err = errors.New("not in Go's poller")
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("watch ring on cpu %d: %w", r.CPU, err)
	}
	w.mu.Lock()
	w.files[r] = f
	w.mu.Unlock()
	watched := make(chan struct{})
	w.done.Go(func() {
		// Read forgets what the poller said before it began, then
		// calls the function at once, and again after each wake-up,
		// until it returns true (never) or the file is closed. So
		// there is one Read for the ring's life, and the first call
		// is where the watch begins.
		first := true
		conn.Read(func(uintptr) bool {
			if first {
				first = false
				close(watched)
			} else {
				w.say()
			}
			return false
		})
		if first {
			close(watched) // closed before it began
		}
	})
	<-watched
	return nil
}

// Remove stops watching r, before it is closed.
func (w *Watcher) Remove(r *Ring) {
	w.mu.Lock()
	f := w.files[r]
	delete(w.files, r)
	w.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

func (w *Watcher) say() {
	select {
	case w.ready <- struct{}{}:
	default: // one already waits: the reader drains every ring
	}
}

// Ready receives when some ring passed its watermark since the last
// receive.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Close stops watching; the rings stay open.
func (w *Watcher) Close() error {
	w.mu.Lock()
	files := w.files
	w.files = nil
	w.mu.Unlock()
	var errs []error
	for _, f := range files {
		errs = append(errs, f.Close())
	}
	w.done.Wait()
	return errors.Join(errs...)
}
