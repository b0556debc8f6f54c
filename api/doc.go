// Package api is bpfperfd's /v1 API as its clients see it: the JSON
// documents the daemon answers with, the client the CLI and `bpfperf top`
// use to reach it over its unix socket, and the time and duration syntax
// both sides accept.
//
// The types here are plain structs of their own: the daemon converts its
// collectors' and store's types to them at the edge (daemon/wire.go), so a
// change inside the daemon does not change the wire, and a client does not
// link the daemon, the collectors or bbolt. Kernel fields keep the
// kernel's names.
package api

// DefaultSocket is where bpfperfd listens unless told otherwise.
const DefaultSocket = "/run/bpfperf/api.sock"
