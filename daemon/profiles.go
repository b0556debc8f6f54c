package daemon

import (
	"context"
	"net/http"
)

// CPU profiling of BPF programs (issue 4). Hooks the rest of the daemon
// calls; the profile package does the sampling and symbolizing.

// ProfileConfig configures continuous and on-demand profiling.
type ProfileConfig struct{}

// ProfilingStatus is the profiling part of GET /v1/status.
type ProfilingStatus struct{}

// profiling is the daemon's profiling state.
type profiling struct{}

// startProfiling starts continuous profiling if configured.
func (d *Daemon) startProfiling(ctx context.Context) error { return nil }

// profileRoutes registers the /v1/profiles endpoints.
func (s *server) profileRoutes(mux *http.ServeMux) {}

// sampledCPU is a program's share of sampled CPU time in the latest
// profile, nil when none covers it.
func (d *Daemon) sampledCPU(id uint32) *float64 { return nil }

// profilingStatus reports profiling in /v1/status, nil when off.
func (d *Daemon) profilingStatus() *ProfilingStatus { return nil }

// learnProfile tells the symbolizer about a program that just appeared.
func (d *Daemon) learnProfile(id uint32) {}
