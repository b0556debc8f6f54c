package collectors

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// lastEntries is how many programs the changed-only sweep remembers (the
// `last` array in bpf/progiter, 48 bytes a program) when loaded with n
// programs on the host: room for twice as many, at least 4,096 (192 KiB),
// at most 1 << 20. Programs past it are written every sweep, as by Sweep:
// correct, only not cheaper.
func lastEntries(n int) uint32 {
	return uint32(min(max(2*n+1024, 4096), 1<<20))
}

// countPrograms is how many programs are loaded, by their ids alone (a
// failed step ends the count: it only sizes `last`).
func countPrograms() int {
	n := 0
	for id := uint32(0); ; n++ {
		next, ok, err := nextID(unix.BPF_PROG_GET_NEXT_ID, id)
		if !ok || err != nil {
			return n
		}
		id = next
	}
}

// trailerType marks the trailer record that ends a changed-only sweep
// (TRAILER_TYPE in bpf/progiter/progiter.c).
const trailerType = 0xffffffff

// Walk is what a changed-only sweep's trailer says of every program the
// walk saw, written or not: how many, and the sum of MixProgram over them.
// A reader that keeps the same two figures over the programs it knows
// (adding what each sweep writes for the first time) tells from them
// alone whether any went away.
type Walk struct {
	Count uint64
	Sum   uint64
}

// Add counts the program with id and load time in w.
func (w *Walk) Add(id uint32, loadTime uint64) {
	w.Count++
	w.Sum += MixProgram(id, loadTime)
}

// Remove takes the program with id and load time out of w.
func (w *Walk) Remove(id uint32, loadTime uint64) {
	w.Count--
	w.Sum -= MixProgram(id, loadTime)
}

// MixProgram spreads a program's id and load time over 64 bits: mix() in
// bpf/progiter/progiter.c, splitmix64's finaliser. A program loaded again
// under a reused id has another load time, so it mixes differently.
func MixProgram(id uint32, loadTime uint64) uint64 {
	x := loadTime + uint64(id)*0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ErrChangedUnsupported says the changed-only sweep cannot run: the
// iterator's globals are not memory-mapped (a kernel before 5.5).
var ErrChangedUnsupported = errors.New("changed-only sweep not supported")

// ErrNoTrailer says a changed-only walk ended without its trailer record
// last, so nothing tells whether a program went away. Seen once in CI (a
// walk of 8 records): a program loaded between the read() that took the
// trailer and the one that found the end was shown after it, which the
// iterator program now leaves out (ended_session in bpf/progiter).
var ErrNoTrailer = errors.New("changed-only sweep without a trailer record")

// SweepChanged runs the iterator once and appends to buf, in id order, only
// the programs that are new since the last changed-only sweep, were loaded
// again under their id, or whose counters moved; all makes it append every
// program (and remember them all again). It returns the walk's trailer.
// The programs it leaves out have the counters it last appended for them.
func (it *ProgIter) SweepChanged(buf []Sample, all bool) ([]Sample, Walk, error) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if err := it.objs.ChangedOnly.Set(uint32(1)); err != nil {
		return buf, Walk{}, fmt.Errorf("%w: %w", ErrChangedUnsupported, err)
	}
	if all {
		it.epoch++
		if err := it.objs.Epoch.Set(it.epoch); err != nil {
			return buf, Walk{}, fmt.Errorf("%w: %w", ErrChangedUnsupported, err)
		}
	}
	data, err := it.read()
	if err != nil {
		return buf, Walk{}, err
	}
	if len(data) < recordSize {
		return buf, Walk{}, fmt.Errorf("%w: %d bytes", ErrNoTrailer, len(data))
	}
	t := decodeRecord(data[len(data)-recordSize:])
	if t.Type != trailerType {
		return buf, Walk{}, fmt.Errorf("%w: %d records, the last program %d of type %d", ErrNoTrailer, len(data)/recordSize, t.ID, t.Type)
	}
	return appendRecords(buf, data[:len(data)-recordSize]), Walk{Count: t.RunCnt, Sum: t.RunTimeNs}, nil
}
