package daemon

import "net/http"

// Benchmark runs handed over by `bpfperf bench --store` (issue 6).

// benchRoutes registers the /v1/bench endpoints.
func (s *server) benchRoutes(mux *http.ServeMux) {}
