package daemon

import (
	"context"
	"net/http"
)

// Per-program perf counters (issue 5). Hooks the rest of the daemon calls;
// collectors does the counting.

// CountersConfig configures which programs are counted and how.
type CountersConfig struct{}

// CountersStatus is the counters part of GET /v1/status: each mechanism,
// available or why not.
type CountersStatus struct{}

// counting is the daemon's counters state.
type counting struct{}

// startCounters probes the mechanisms and starts counting windows.
func (d *Daemon) startCounters(ctx context.Context) error { return nil }

// counterRoutes registers the /v1/counters endpoints.
func (s *server) counterRoutes(mux *http.ServeMux) {}

// fillCounters adds the latest per-run counter figures to a row.
func (d *Daemon) fillCounters(row *ProgRow) {}

// countersStatus reports counters in /v1/status.
func (d *Daemon) countersStatus() *CountersStatus { return nil }

// counterProgramAppeared lets counting match a new program against
// --counters.programs.
func (d *Daemon) counterProgramAppeared(id uint32, name string) {}
