//go:build !amd64

package privtest

// UprobeTarget returns x+1 (in assembly on amd64, where probes attach to
// it; Probe skips elsewhere).
//
//go:noinline
func UprobeTarget(x uint64) uint64 { return x + 1 }

func uprobeTargetAddr() uintptr { return 0 }
