package api

import "time"

// ProfileInfo describes one stored profile in GET /v1/profiles.
type ProfileInfo struct {
	ID       string    `json:"id"`
	Start    time.Time `json:"start"`
	Duration int64     `json:"duration_ns"`
	Kind     string    `json:"kind"` // ProfileContinuous or ProfileOnDemand
	Event    string    `json:"event"`
	Hz       int       `json:"hz"`
	// Samples counts the samples in the profile (with a BPF frame, unless
	// the daemon keeps every kernel sample).
	Samples int64 `json:"samples"`
	// Bytes is the size of the stored, gzipped pprof profile.
	Bytes int `json:"bytes"`
}

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
