package daemon

import (
	"errors"
	"net/http"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// The daemon's sentinel errors. Errors are wrapped with %w on their way
// up, so callers (and statusOf) can still match them.
var (
	// Starting the daemon.

	// ErrBadConfig: a flag is out of range, or a path is unusable. It is
	// bench's, so a bad run parameter and a bad flag match the same error.
	ErrBadConfig = bench.ErrBadConfig
	// ErrSocketInUse: another bpfperfd answers on the socket or holds
	// the store.
	ErrSocketInUse = errors.New("socket is in use by another bpfperfd")
	// ErrHostLocked: another bpfperfd runs on this host (hostlock.go).
	ErrHostLocked = errors.New("one bpfperfd per host")
	// ErrNotPrivileged means the kernel refused to let us read programs.
	ErrNotPrivileged = errors.New("not privileged")

	// Answering the API.

	ErrUnknownProgram   = errors.New("unknown program")
	ErrUnknownMap       = errors.New("unknown map")
	ErrAmbiguousMap     = errors.New("ambiguous map")
	ErrUnknownOwner     = errors.New("unknown owner")
	ErrAmbiguousProgram = errors.New("ambiguous program")
	ErrBadRequest       = errors.New("bad request")
	// ErrCountersUnavailable: the exact mechanism cannot run here.
	ErrCountersUnavailable = errors.New("exact perf counters unavailable")
	// ErrTooManyCounterTargets: --counters.max targets are enabled.
	ErrTooManyCounterTargets = collectors.ErrTooManyTargets
	// ErrProfilingOff means CPU profiling could not start on this host.
	ErrProfilingOff = errors.New("CPU profiling is off")
	// ErrUnknownBenchRun: no stored run has that id.
	ErrUnknownBenchRun = store.ErrUnknownBenchRun
	// ErrUnknownRegression: no stored finding has that id.
	ErrUnknownRegression = errors.New("no such regression")
	// ErrNoData: a range holds no samples to decide from.
	ErrNoData = errors.New("no data")

	// Answering over TCP (web.go).

	// ErrReadOnly: the TCP listener only reads; what changes state or
	// starts work stays on the unix socket.
	ErrReadOnly = errors.New("read-only over TCP: use the unix socket")
	// ErrTooManyScrapes: --web.max-requests requests are being answered.
	ErrTooManyScrapes = errors.New("too many concurrent requests")
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
