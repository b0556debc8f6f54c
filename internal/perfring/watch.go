package perfring

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Watcher says when a ring holds more than its wake-up watermark (by
// default half the ring), so a reader that has nothing else to do waits
// for that instead of waking on a timer to find the rings nearly empty.
//
// It waits through Go's own poller: the rings' fds go in an epoll
// instance, and that instance's fd, readable whenever a ring woke it,
// goes in the runtime's. No thread is held in a system call meanwhile,
// and the process sleeps until the kernel has something for it.
type Watcher struct {
	file  *os.File
	ready chan struct{}
	done  sync.WaitGroup
}

// Watch watches the rings' events (their fds stay the caller's).
func Watch(rings []*Ring) (*Watcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch rings: %w", err)
	}
	for _, r := range rings {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, r.FD, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(r.FD)}); err != nil {
			unix.Close(epfd)
			return nil, fmt.Errorf("watch ring on cpu %d: %w", r.CPU, err)
		}
	}
	// Non-blocking, so os.NewFile registers it with the runtime's poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("watch rings: %w", err)
	}
	w := &Watcher{file: os.NewFile(uintptr(epfd), "perf rings"), ready: make(chan struct{}, 1)}
	conn, err := w.file.SyscallConn()
	if err != nil {
		w.file.Close()
		return nil, fmt.Errorf("watch rings: %w", err)
	}
	w.done.Go(func() { w.run(conn) })
	return w, nil
}

// run tells Ready each time a ring woke the epoll instance, until Close.
func (w *Watcher) run(conn interface {
	Read(func(fd uintptr) bool) error
}) {
	events := make([]unix.EpollEvent, 8)
	for {
		// Read calls the function at once, then again each time the
		// poller says the instance is readable, until it returns true.
		// A ring's readiness cannot be asked again: perf_poll clears it
		// as it reports it, and the runtime's poller, checking the
		// instance, already asked. So the first call only empties the
		// instance's ready list, and any call after a wait is a wake-up.
		waited := false
		err := conn.Read(func(fd uintptr) bool {
			unix.EpollWait(int(fd), events, 0)
			woke := waited
			waited = true
			return woke
		})
		if err != nil {
			return // closed
		}
		select {
		case w.ready <- struct{}{}:
		default: // one already waits: the reader drains every ring
		}
	}
}

// Ready receives when some ring passed its watermark since the last
// receive.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Close stops watching; the rings stay open.
func (w *Watcher) Close() error {
	err := w.file.Close()
	w.done.Wait()
	return err
}
