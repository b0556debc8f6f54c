package collectors

import (
	"fmt"

	"github.com/cilium/ebpf/link"
)

// Floor is the least a sweep that reads every program's counters can
// cost: the sweep's own iterator program set to walk every program and
// read the fields and per-CPU counters the sweep reads, writing nothing.
// It is what the daemon's CPU is measured against (make bench); nothing
// in the daemon runs it.
type Floor struct{ it *ProgIter }

// NewFloor loads the floor's iterator (Linux 5.19 and BTF, as NewProgIter).
func NewFloor() (*Floor, error) {
	it, err := loadProgIter(progIterOptions{noOutput: true})
	if err != nil {
		return nil, err
	}
	return &Floor{it}, nil
}

// Walk runs the iterator once over every program.
func (f *Floor) Walk() error { return walkSilent(f.it.link) }

// walkSilent runs an iterator that writes nothing once, as the sweep runs
// its own (readIter), and fails if it wrote anything.
func walkSilent(l *link.Iter) error {
	data, err := readIter(l, make([]byte, 0, 64), 1)
	if err != nil {
		return err
	}
	if len(data) != 0 {
		return fmt.Errorf("an iterator that writes nothing wrote %d bytes", len(data))
	}
	return nil
}

// Close unloads the iterator.
func (f *Floor) Close() error { return f.it.Close() }
