package api

import "github.com/bpfperf/bpfperf/store"

// ProfileInfo describes one stored profile in GET /v1/profiles
// (store.ProfileInfo).
type ProfileInfo = store.ProfileInfo

// Kinds of stored profiles.
const (
	ProfileContinuous = "continuous"
	ProfileOnDemand   = "on-demand"
)

// Headers of profile answers, whose bodies are gzipped pprof.
const (
	HeaderProfileID    = "Bpfperf-Profile-Id"
	HeaderProfileCount = "Bpfperf-Profile-Count"
	HeaderStoreError   = "Bpfperf-Store-Error"
)

// Capture is what an on-demand capture returns.
type Capture struct {
	Data []byte // gzipped pprof
	// ID is the stored profile's id; empty when the daemon could not store
	// it, and StoreError says why.
	ID         string
	StoreError string
}
