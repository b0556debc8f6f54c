// Package api is bpfperfd's /v1 API as its clients see it: the JSON
// documents the daemon answers with, the client the CLI and `bpfperf top`
// use to reach it over its unix socket, and the time and duration syntax
// both sides accept.
//
// Where a layer below already defines a document with the same fields and
// JSON (a program's metadata, owners and attach points in collectors; the
// store's events, bench runs, profile listings and sizes), the wire type
// is that one, an alias, so nothing converts a struct into its twin and a
// field added there is on the wire at once (TestGoldenAPI shows it). The
// rest are structs of their own, filled at the daemon's edge
// (daemon/httpapi). A Go client links collectors and the store (bbolt)
// with it. Kernel fields keep the kernel's names.
package api

// DefaultSocket is where bpfperfd listens unless told otherwise.
const DefaultSocket = "/run/bpfperf/api.sock"
