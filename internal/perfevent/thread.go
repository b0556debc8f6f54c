package perfevent

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ThreadCounters count events on one OS thread, in kernel mode only, as one
// perf event group: all are on the PMU together or not at all, so their
// ratios (IPC) hold even when multiplexed. Open them on a thread locked
// with runtime.LockOSThread, and Start, Stop and Close on it: the events
// count that thread and nothing else, which is what a BPF_PROG_TEST_RUN
// call runs on.
type ThreadCounters struct {
	events []Event
	fds    []int // fds[0] leads the group
	buf    []byte
}

// OpenThreadCounters opens events, disabled, on the calling thread. A
// failure is a *OpenError saying why (no PMU, counters busy, ...).
func OpenThreadCounters(events []Event) (*ThreadCounters, error) {
	if len(events) == 0 {
		return nil, errors.New("thread counters: no events")
	}
	c := &ThreadCounters{events: events, buf: make([]byte, 8*(3+len(events)))}
	for i, e := range events {
		attr, err := e.CountingAttr()
		if err != nil {
			c.Close()
			return nil, err
		}
		attr.Read_format = ReadFormat | unix.PERF_FORMAT_GROUP
		attr.Bits |= unix.PerfBitExcludeUser | unix.PerfBitExcludeHv
		group := -1
		if i == 0 {
			attr.Bits |= unix.PerfBitDisabled
		} else {
			group = c.fds[0]
		}
		fd, err := unix.PerfEventOpen(attr, 0, -1, group, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			c.Close()
			return nil, NewOpenError(e, -1, err)
		}
		c.fds = append(c.fds, fd)
	}
	return c, nil
}

// Events are the events counted, in the order Stop returns them.
func (c *ThreadCounters) Events() []Event { return c.events }

// Start zeroes the counts and starts counting.
func (c *ThreadCounters) Start() error {
	if err := c.ioctl(unix.PERF_EVENT_IOC_RESET); err != nil {
		return err
	}
	return c.ioctl(unix.PERF_EVENT_IOC_ENABLE)
}

// Stop stops counting and returns each event's count since Start, scaled
// by time enabled / running when the group was multiplexed (as perf stat
// scales), and the share of the time it was on the PMU (1 when it was
// never multiplexed; 0 when it never ran, and the counts are then 0).
func (c *ThreadCounters) Stop() (counts []float64, running float64, err error) {
	if err := c.ioctl(unix.PERF_EVENT_IOC_DISABLE); err != nil {
		return nil, 0, err
	}
	n, err := unix.Read(c.fds[0], c.buf)
	if err != nil {
		return nil, 0, fmt.Errorf("read thread counters: %w", err)
	}
	return decodeGroup(c.buf[:n], len(c.events))
}

// decodeGroup reads a PERF_FORMAT_GROUP|TOTAL_TIME_ENABLED|RUNNING record:
// nr, time enabled, time running, then nr values.
func decodeGroup(b []byte, want int) ([]float64, float64, error) {
	ne := binary.NativeEndian
	if len(b) < 24 || int(ne.Uint64(b)) != want || len(b) < 24+8*want {
		return nil, 0, fmt.Errorf("read thread counters: %d bytes for %d events", len(b), want)
	}
	enabled, running := ne.Uint64(b[8:]), ne.Uint64(b[16:])
	share, scale := 1.0, 1.0
	switch {
	case running == 0:
		share, scale = 0, 0
	case running < enabled:
		share, scale = float64(running)/float64(enabled), float64(enabled)/float64(running)
	}
	out := make([]float64, want)
	for i := range out {
		out[i] = float64(ne.Uint64(b[24+8*i:])) * scale
	}
	return out, share, nil
}

func (c *ThreadCounters) ioctl(req uint) error {
	if err := unix.IoctlSetInt(c.fds[0], req, unix.PERF_IOC_FLAG_GROUP); err != nil {
		return fmt.Errorf("thread counters: %w", err)
	}
	return nil
}

// Close closes the events.
func (c *ThreadCounters) Close() error {
	var errs []error
	for i := len(c.fds) - 1; i >= 0; i-- {
		errs = append(errs, unix.Close(c.fds[i]))
	}
	c.fds = nil
	return errors.Join(errs...)
}
