package collectors

import (
	"sync"

	"github.com/cilium/ebpf"
)

// own is the set of programs this process loaded and still has: the
// iterators, the counters' fentry/fexit pair, the stats-cost probe. "The
// daemon's own" means loaded by it; holding an fd does not make a program
// its own (the daemon reads other programs through brief fds, and a test
// binary that runs the daemon holds its workloads).
var own = struct {
	sync.Mutex
	ids map[uint32]bool
}{ids: map[uint32]bool{}}

// MarkOwn records that this process loaded progs (those of the
// collectors' own packages too, such as loadrec's); the returned function
// forgets them, for when they are closed.
func MarkOwn(progs ...*ebpf.Program) (forget func()) {
	var ids []uint32
	for _, p := range progs {
		if p == nil {
			continue
		}
		info, err := p.Info()
		if err != nil {
			continue
		}
		if id, ok := info.ID(); ok {
			ids = append(ids, uint32(id))
		}
	}
	own.Lock()
	for _, id := range ids {
		own.ids[id] = true
	}
	own.Unlock()
	return func() {
		own.Lock()
		for _, id := range ids {
			delete(own.ids, id)
		}
		own.Unlock()
	}
}

// LoadedHere reports whether this process loaded program id and has not
// closed it.
func LoadedHere(id uint32) bool {
	own.Lock()
	defer own.Unlock()
	return own.ids[id]
}
