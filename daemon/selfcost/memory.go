package selfcost

import (
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// idleHeapLimit is how much freed heap the daemon keeps from the OS
// between bursts before it hands it back at once.
const idleHeapLimit = 8 << 20

// ReturnIdleMemory hands freed heap back to the OS when more than
// idleHeapLimit of it waits. A burst (thousands of programs loaded and
// unloaded, a large query) grows the heap; Go's background scavenger
// returns that memory only slowly, and the daemon's resident memory is
// what a production team watches. A forced collection of the daemon's
// heap costs a few milliseconds, paid only after a burst.
func ReturnIdleMemory() {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() == rtmetrics.KindUint64 && s[0].Value.Uint64() > idleHeapLimit {
		debug.FreeOSMemory()
	}
}

// HeapLiveBytes is the heap the last collection found live.
func HeapLiveBytes() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
