package daemon

import (
	"errors"
	"net/http"

	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// The daemon's sentinel errors, defined in daemon/errs so that every room
// of the daemon wraps the same ones. Errors are wrapped with %w on their
// way up, so callers (and statusOf) can still match them.
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

// statusOf is the HTTP status an API error answers with: the first kind
// in this list that err matches, 500 for none.
func statusOf(err error) int {
	for _, k := range []struct {
		code int
		errs []error
	}{
		{http.StatusBadRequest, []error{ErrBadRequest, profile.ErrBadDuration, ErrNoData}},
		{http.StatusNotFound, []error{ErrUnknownProgram, ErrUnknownMap, ErrUnknownOwner, ErrUnknownBenchRun, ErrUnknownRegression, store.ErrNoProfile, profile.ErrNoProfiles}},
		{http.StatusConflict, []error{ErrAmbiguousProgram, ErrAmbiguousMap, ErrTooManyCounterTargets, profile.ErrBusy, perfevent.ErrCountersBusy}},
		{http.StatusMethodNotAllowed, []error{ErrReadOnly}},
		{http.StatusServiceUnavailable, []error{ErrCountersUnavailable, ErrProfilingOff, ErrTooManyScrapes}},
		// This host cannot sample or count the event.
		{http.StatusNotImplemented, []error{perfevent.ErrNoPMU, perfevent.ErrPMURefused}},
	} {
		for _, e := range k.errs {
			if errors.Is(err, e) {
				return k.code
			}
		}
	}
	return http.StatusInternalServerError
}
