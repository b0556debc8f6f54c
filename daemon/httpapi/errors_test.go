package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// TestStatusOf: each kind of API error answers with its status, also
// wrapped, and anything else is a 500.
func TestStatusOf(t *testing.T) {
	for err, want := range map[error]int{
		errs.BadRequest:                http.StatusBadRequest,
		profile.ErrBadDuration:         http.StatusBadRequest,
		errs.UnknownProgram:            http.StatusNotFound,
		errs.UnknownBenchRun:           http.StatusNotFound,
		store.ErrNoProfile:             http.StatusNotFound,
		profile.ErrNoProfiles:          http.StatusNotFound,
		errs.AmbiguousProgram:          http.StatusConflict,
		collectors.ErrTooManyTargets:   http.StatusConflict,
		profile.ErrBusy:                http.StatusConflict,
		errs.CountersUnavailable:       http.StatusServiceUnavailable,
		errs.ProfilingOff:              http.StatusServiceUnavailable,
		errs.TooManyScrapes:            http.StatusServiceUnavailable,
		errs.ReadOnly:                  http.StatusMethodNotAllowed,
		errors.New("the disk is full"): http.StatusInternalServerError,
		perfevent.NewOpenError(perfevent.Cycles, 0, unix.ENOENT):     http.StatusNotImplemented,
		perfevent.NewOpenError(perfevent.Cycles, 0, unix.EOPNOTSUPP): http.StatusNotImplemented,
		perfevent.NewOpenError(perfevent.Cycles, 0, unix.EBUSY):      http.StatusConflict,
	} {
		if got := statusOf(fmt.Errorf("handler: %w", err)); got != want {
			t.Errorf("%v: status %d, want %d", err, got, want)
		}
	}
}
