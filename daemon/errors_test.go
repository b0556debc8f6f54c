package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// TestStatusOf: each kind of API error answers with its status, also
// wrapped, and anything else is a 500.
func TestStatusOf(t *testing.T) {
	for err, want := range map[error]int{
		ErrBadRequest:                  http.StatusBadRequest,
		profile.ErrBadDuration:         http.StatusBadRequest,
		ErrUnknownProgram:              http.StatusNotFound,
		ErrUnknownBenchRun:             http.StatusNotFound,
		store.ErrNoProfile:             http.StatusNotFound,
		profile.ErrNoProfiles:          http.StatusNotFound,
		ErrAmbiguousProgram:            http.StatusConflict,
		collectors.ErrTooManyTargets:   http.StatusConflict,
		profile.ErrBusy:                http.StatusConflict,
		ErrCountersUnavailable:         http.StatusServiceUnavailable,
		ErrProfilingOff:                http.StatusServiceUnavailable,
		ErrTooManyScrapes:              http.StatusServiceUnavailable,
		ErrReadOnly:                    http.StatusMethodNotAllowed,
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
