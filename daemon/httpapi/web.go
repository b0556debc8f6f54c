package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// The opt-in TCP listener (issue 13): /metrics for Prometheus,
// /debug/pprof/profile for Parca and Pyroscope, and the /v1 GETs, so a
// fleet's engines read every host without a login. It only reads: any
// other method answers 405 (errs.ReadOnly), and what changes state or starts
// work (captures, counters enable, bench runs) stays on the unix socket.
// TLS and basic auth are exporter-toolkit's, from --web.config.file.

// defaultPprofSeconds is Go's net/http/pprof default, capped by
// --profile.limit.
const defaultPprofSeconds = 30

// startWeb opens the TCP listener, if configured, and serves it until the
// returned stop is called. The address is bound here, so a port in use
// fails the start; exporter-toolkit's web.Serve then does TLS and auth.
func (d *daemon) startWeb() (stop func(), err error) {
	c := d.cfg.Web
	if c.ListenAddress == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", c.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("%w: --web.listen-address: %w", errs.BadConfig, err)
	}
	srv := &http.Server{Handler: d.webRoutes(), ReadHeaderTimeout: 5 * time.Second}
	flags := &web.FlagConfig{WebListenAddresses: &[]string{c.ListenAddress}, WebConfigFile: &c.ConfigFile}
	log := d.cfg.Logger.With("listener", "web")
	go func() {
		if err := web.Serve(ln, srv, flags, log); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.cfg.Logger.Error("web listener stopped", "address", c.ListenAddress, "err", err)
		}
	}()
	return func() { srv.Close() }, nil
}

// webRoutes is what the TCP listener answers: GETs only, at most
// MaxRequests at a time.
func (d *daemon) webRoutes() http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerForTransactional(d.Metrics, promhttp.HandlerOpts{
		ErrorLog: slogPrinter{d}, ErrorHandling: promhttp.ContinueOnError,
	})
	params := register(mux, []route{
		{"GET /metrics", nil, metrics.ServeHTTP},
		{"GET /debug/pprof/profile", []string{"seconds"}, (&server{d: d}).pprofProfile},
	})
	// The /v1 routes check their own parameters; the dashboard's take
	// none that matter.
	mux.Handle("GET /v1/", (&server{d: d}).routes())
	d.dashboardRoutes(mux)
	return readOnly(limitRequests(strict(mux, params), d.cfg.Web.MaxRequests))
}

// readOnly refuses every method but GET and HEAD.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			reply(w, nil, fmt.Errorf("%w: %s %s", errs.ReadOnly, r.Method, r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitRequests answers at most n requests at once; the next gets 503 at
// once rather than queueing (scrapers retry on their next interval).
func limitRequests(next http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			reply(w, nil, fmt.Errorf("%w: at most %d at once (--web.max-requests)", errs.TooManyScrapes, n))
		}
	})
}

// slogPrinter logs promhttp's errors through the daemon's logger.
type slogPrinter struct{ d *daemon }

func (p slogPrinter) Println(v ...any) { p.d.cfg.Logger.Warn("metrics", "err", fmt.Sprint(v...)) }
