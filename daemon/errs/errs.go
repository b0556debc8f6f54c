// Package errs holds the daemon's sentinel errors, so that each of its
// rooms (daemon/sampler, ...) wraps the same ones and the API can match
// them with errors.Is, whichever room a failure came from. Package daemon
// re-exports them under their Err names.
package errs

import (
	"errors"

	"github.com/bpfperf/bpfperf/bench"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/store"
)

var (
	// Starting the daemon.

	// BadConfig: a flag is out of range, or a path is unusable. It is
	// bench's, so a bad run parameter and a bad flag match the same error.
	BadConfig = bench.ErrBadConfig
	// SocketInUse: another bpfperfd answers on the socket or holds the
	// store.
	SocketInUse = errors.New("socket is in use by another bpfperfd")
	// HostLocked: another bpfperfd runs on this host.
	HostLocked = errors.New("one bpfperfd per host")
	// NotPrivileged means the kernel refused to let us read programs.
	NotPrivileged = errors.New("not privileged")

	// Answering the API.

	UnknownProgram   = errors.New("unknown program")
	UnknownMap       = errors.New("unknown map")
	AmbiguousMap     = errors.New("ambiguous map")
	UnknownOwner     = errors.New("unknown owner")
	UnknownWorkload  = errors.New("unknown workload")
	AmbiguousProgram = errors.New("ambiguous program")
	BadRequest       = errors.New("bad request")
	// CountersUnavailable: the exact mechanism cannot run here.
	CountersUnavailable = errors.New("exact perf counters unavailable")
	// LatencyUnavailable: latency windows cannot run here (the kernel
	// refuses tracing programs).
	LatencyUnavailable = errors.New("latency windows unavailable")
	// TooManyCounterTargets: --counters.max targets are enabled.
	TooManyCounterTargets = collectors.ErrTooManyTargets
	// StatsCostFixed: stats' cost cannot be measured again while the
	// daemon runs, since stats stay on all the time here.
	StatsCostFixed = errors.New("stats are on all the time here (--stats.budget 0, --stats.duty 100%, the sysctl, or their cost not measured at start): a measurement would leave a gap in every program's counters; restart bpfperfd to measure it")
	// StatsHeld: another holder keeps stats on, so there is no baseline.
	StatsHeld = collectors.ErrStatsHeld
	// ProfilingOff means CPU profiling could not start on this host.
	ProfilingOff = errors.New("CPU profiling is off")
	// UnknownBenchRun: no stored run has that id.
	UnknownBenchRun = store.ErrUnknownBenchRun
	// UnknownRegression: no stored finding has that id.
	UnknownRegression = errors.New("no such regression")
	// NoData: a range holds no samples to decide from.
	NoData = errors.New("no data")

	// Answering over TCP.

	// ReadOnly: the TCP listener only reads; what changes state or starts
	// work stays on the unix socket.
	ReadOnly = errors.New("read-only over TCP: use the unix socket")
	// TooManyScrapes: --web.max-requests requests are being answered.
	TooManyScrapes = errors.New("too many concurrent requests")
)
