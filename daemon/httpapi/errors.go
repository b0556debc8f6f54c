package httpapi

import (
	"errors"
	"net/http"

	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// statusOf is the HTTP status an API error answers with: the first kind
// in this list that err matches, 500 for none.
func statusOf(err error) int {
	for _, k := range []struct {
		code int
		errs []error
	}{
		{http.StatusBadRequest, []error{errs.BadRequest, profile.ErrBadDuration, errs.NoData}},
		{http.StatusNotFound, []error{errs.UnknownProgram, errs.UnknownMap, errs.UnknownOwner, errs.UnknownWorkload, errs.UnknownBenchRun, errs.UnknownRegression, store.ErrNoProfile, profile.ErrNoProfiles}},
		{http.StatusConflict, []error{errs.AmbiguousProgram, errs.AmbiguousMap, errs.TooManyCounterTargets, profile.ErrBusy, perfevent.ErrCountersBusy, errs.StatsCostFixed, sampler.ErrRemeasurePending}},
		{http.StatusMethodNotAllowed, []error{errs.ReadOnly}},
		{http.StatusServiceUnavailable, []error{errs.CountersUnavailable, errs.LatencyUnavailable, errs.ProfilingOff, errs.TooManyScrapes, errs.StatsHeld}},
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
