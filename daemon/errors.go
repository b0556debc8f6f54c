package daemon

import (
	"github.com/bpfperf/bpfperf/daemon/errs"
)

// The daemon's sentinel errors, defined in daemon/errs so that every room
// of the daemon wraps the same ones. Errors are wrapped with %w on their
// way up, so callers (and the API's status codes, httpapi) can still match them.
var (
	ErrBadConfig             = errs.BadConfig
	ErrSocketInUse           = errs.SocketInUse
	ErrHostLocked            = errs.HostLocked
	ErrNotPrivileged         = errs.NotPrivileged
	ErrUnknownProgram        = errs.UnknownProgram
	ErrUnknownMap            = errs.UnknownMap
	ErrAmbiguousMap          = errs.AmbiguousMap
	ErrUnknownOwner          = errs.UnknownOwner
	ErrAmbiguousProgram      = errs.AmbiguousProgram
	ErrBadRequest            = errs.BadRequest
	ErrCountersUnavailable   = errs.CountersUnavailable
	ErrTooManyCounterTargets = errs.TooManyCounterTargets
	ErrProfilingOff          = errs.ProfilingOff
	ErrUnknownBenchRun       = errs.UnknownBenchRun
	ErrUnknownRegression     = errs.UnknownRegression
	ErrNoData                = errs.NoData
	ErrReadOnly              = errs.ReadOnly
	ErrTooManyScrapes        = errs.TooManyScrapes
)
