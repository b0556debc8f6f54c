package perfevent

import (
	"errors"
	"fmt"

	"github.com/elastic/go-perf"
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
	start  perf.GroupCount
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
		attr.CountFormat = perf.CountFormat{Group: true, Enabled: true, Running: true}
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
	}
	return c, nil
}

// Events are the events counted, in the order Stop returns them.
func (c *ThreadCounters) Events() []Event { return c.events }

// Start notes the counts so far and starts counting.
func (c *ThreadCounters) Start() error {
	start, err := c.leader.ReadGroupCount()
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
	end, err := c.leader.ReadGroupCount()
	if err != nil {
		return nil, 0, fmt.Errorf("thread counters: %w", err)
	}
	return groupDelta(c.start, end, len(c.events))
}

// groupDelta is what a group counted between two reads, scaled when it was
// multiplexed.
func groupDelta(a, b perf.GroupCount, want int) ([]float64, float64, error) {
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
		out[i] = float64(b.Values[i].Value-a.Values[i].Value) * scale
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
