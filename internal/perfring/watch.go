package perfring

import (
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Watcher says when a ring holds more than its wake-up watermark (by
// default half the ring), so a reader that has nothing else to do waits
// for that instead of waking on a timer to find the rings nearly empty.
//
// A ring's readiness is a one-shot flag, not a level: perf_poll clears
// it as it reports it, so a poll whose answer is thrown away loses that
// wake-up for good, and a ring at a half-ring watermark then fills
// without a word. So exactly one poller ever asks: a goroutine blocked
// in epoll_wait on the rings, which says Ready after every return. (The
// runtime's own poller cannot be put in front of it: checking a nested
// epoll instance polls the rings, and Go reads a file's readiness again
// at each Read, dropping what it heard between two.) A blocked goroutine
// holds a thread, not a CPU: the runtime hands its processor on.
type Watcher struct {
	epfd, stop int
	ready      chan struct{}
	done       sync.WaitGroup
}

// Watch watches the rings' events (their fds stay the caller's). It says
// Ready once at the start: a record written before a ring joined the
// epoll instance woke no one, and the first drain finds it.
func Watch(rings []*Ring) (*Watcher, error) {
	w := &Watcher{epfd: -1, stop: -1, ready: make(chan struct{}, 1)}
	if err := w.open(rings); err != nil {
		w.release()
		return nil, fmt.Errorf("watch rings: %w", err)
	}
	w.ready <- struct{}{}
	w.done.Go(w.run)
	return w, nil
}

func (w *Watcher) open(rings []*Ring) error {
	var err error
	if w.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return err
	}
	if w.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return err
	}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, w.stop, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(w.stop)}); err != nil {
		return err
	}
	for _, r := range rings {
		if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, r.FD, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(r.FD)}); err != nil {
			return fmt.Errorf("ring on cpu %d: %w", r.CPU, err)
		}
	}
	return nil
}

// run says Ready after each wait that returned a ring, until Close.
func (w *Watcher) run() {
	events := make([]unix.EpollEvent, 8)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if err != nil && err != unix.EINTR {
			return // cannot happen with valid fds
		}
		woke := false
		for _, ev := range events[:max(n, 0)] {
			if int(ev.Fd) == w.stop {
				return
			}
			woke = true
		}
		if !woke {
			continue // a signal interrupted the wait
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
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(w.stop, one[:]); err != nil {
		return fmt.Errorf("stop watching rings: %w", err)
	}
	w.done.Wait()
	w.release()
	return nil
}

func (w *Watcher) release() {
	for _, fd := range []int{w.epfd, w.stop} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
