package perfevent

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/elastic/go-perf"
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
	leader *perf.Event
	all    []*perf.Event // leader first
	ids    []uint64      // the kernel's id of each, in the same order
	start  groupReading
}

// OpenThreadCounters opens events, disabled, on the calling thread. A
// failure is a *OpenError saying why (no PMU, counters busy, ...).
func OpenThreadCounters(events []Event) (*ThreadCounters, error) {
	if len(events) == 0 {
		return nil, errors.New("thread counters: no events")
	}
	c := &ThreadCounters{events: events}
	for i, e := range events {
		attr, err := e.CountingAttr()
		if err != nil {
			c.Close()
			return nil, err
		}
		attr.CountFormat = perf.CountFormat{Group: true, Enabled: true, Running: true, ID: true}
		attr.Options.ExcludeUser = true
		attr.Options.ExcludeHypervisor = true
		attr.Options.Disabled = i == 0 // members follow the leader
		ev, err := perf.Open(attr, perf.CallingThread, perf.AnyCPU, c.leader)
		if err != nil {
			c.Close()
			return nil, NewOpenError(e, -1, err)
		}
		if i == 0 {
			c.leader = ev
		}
		c.all = append(c.all, ev)
		id, err := ev.ID()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("thread counters: %v: %w", e, err)
		}
		c.ids = append(c.ids, id)
	}
	return c, nil
}

// Events are the events counted, in the order Stop returns them.
func (c *ThreadCounters) Events() []Event { return c.events }

// Start notes the counts so far and starts counting.
func (c *ThreadCounters) Start() error {
	start, err := c.read()
	if err != nil {
		return fmt.Errorf("thread counters: %w", err)
	}
	c.start = start
	return c.leader.Enable()
}

// Stop stops counting and returns each event's count since Start, scaled
// by time enabled / running when the group was multiplexed (as perf stat
// scales), and the share of the time it was on the PMU (1 when it was
// never multiplexed; 0 when it never ran, and the counts are then 0).
func (c *ThreadCounters) Stop() (counts []float64, running float64, err error) {
	if err := c.leader.Disable(); err != nil {
		return nil, 0, fmt.Errorf("thread counters: %w", err)
	}
	end, err := c.read()
	if err != nil {
		return nil, 0, fmt.Errorf("thread counters: %w", err)
	}
	return groupDelta(c.start, end, len(c.events))
}

// read reads the group through its leader.
func (c *ThreadCounters) read() (groupReading, error) {
	fd, err := c.leader.FD()
	if err != nil {
		return groupReading{}, err
	}
	buf := make([]byte, groupReadSize(len(c.ids)))
	n, err := unix.Read(fd, buf)
	if err != nil {
		return groupReading{}, fmt.Errorf("read group: %w", err)
	}
	return parseGroupRead(buf[:n], c.ids)
}

// groupReading is one read of a counting group.
type groupReading struct {
	Enabled, Running uint64 // ns
	Values           []uint64
}

// groupReadSize is the size of a group read of n events with
// PERF_FORMAT_GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING|ID: nr,
// time_enabled and time_running, then a value and an id per event (see
// struct read_format in perf_event_open(2)).
func groupReadSize(n int) int { return 8 * (3 + 2*n) }

// parseGroupRead decodes a group read in that layout, in the host's byte
// order, and checks that it holds the events ids names, in that order.
func parseGroupRead(buf []byte, ids []uint64) (groupReading, error) {
	if len(buf) != groupReadSize(len(ids)) {
		return groupReading{}, fmt.Errorf("group read of %d bytes, want %d for %d events", len(buf), groupReadSize(len(ids)), len(ids))
	}
	u64 := func(i int) uint64 { return binary.NativeEndian.Uint64(buf[8*i:]) }
	if nr := u64(0); nr != uint64(len(ids)) {
		return groupReading{}, fmt.Errorf("group read of %d events, want %d", nr, len(ids))
	}
	r := groupReading{Enabled: u64(1), Running: u64(2), Values: make([]uint64, len(ids))}
	for i, id := range ids {
		r.Values[i] = u64(3 + 2*i)
		if got := u64(4 + 2*i); got != id {
			return groupReading{}, fmt.Errorf("group read: event %d has id %d, want %d", i, got, id)
		}
	}
	return r, nil
}

// groupDelta is what a group counted between two reads, scaled when it was
// multiplexed.
func groupDelta(a, b groupReading, want int) ([]float64, float64, error) {
	if len(a.Values) != want || len(b.Values) != want {
		return nil, 0, fmt.Errorf("read thread counters: %d and %d values for %d events", len(a.Values), len(b.Values), want)
	}
	enabled, running := b.Enabled-a.Enabled, b.Running-a.Running
	share, scale := 1.0, 1.0
	switch {
	case running <= 0:
		share, scale = 0, 0
	case running < enabled:
		share, scale = float64(running)/float64(enabled), float64(enabled)/float64(running)
	}
	out := make([]float64, want)
	for i := range out {
		out[i] = float64(b.Values[i]-a.Values[i]) * scale
	}
	return out, share, nil
}

// Close closes the events.
func (c *ThreadCounters) Close() error {
	var errs []error
	for i := len(c.all) - 1; i >= 0; i-- {
		errs = append(errs, c.all[i].Close())
	}
	c.all, c.leader = nil, nil
	return errors.Join(errs...)
}
