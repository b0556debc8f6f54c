// Package transientfd keeps the fds this process opens for a moment on
// other people's BPF objects (to read a program's metadata, a link's
// target, a map's fill) out of scans of who holds what. Such an fd makes
// the daemon look like an owner of a program it only glanced at, so a scan
// waits until none is open, and an fd waits until no scan runs. Both are
// brief: an fd is held for a few system calls, a scan for one iterator read
// or one /proc walk.
package transientfd

import "sync"

var mu sync.RWMutex

// Open marks the start of a brief hold, before the fd is opened; Done its
// end, after it is closed (or failed to open). Holds never nest: open,
// read, close, then the next.
func Open() { mu.RLock() }

// Done ends a hold Open began.
func Done() { mu.RUnlock() }

// Scan runs scan while no brief hold is open.
func Scan(scan func()) {
	mu.Lock()
	defer mu.Unlock()
	scan()
}
