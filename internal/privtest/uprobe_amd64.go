package privtest

// UprobeTarget returns x+1. It is written in assembly so that a uretprobe
// may replace its return address: Go never preempts or scans a goroutine
// stopped in an assembly function, and so never walks a stack whose
// return address the kernel has hijacked (a Go function's could make the
// runtime fail on an unexpected return pc).
//
//go:noescape
func UprobeTarget(x uint64) uint64

// uprobeTargetAddr is UprobeTarget's code's address (its ABI0 symbol,
// which Go callers reach through a wrapper).
func uprobeTargetAddr() uintptr
