package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// The opt-in TCP listener (issue 13): /metrics for Prometheus,
// /debug/pprof/profile for Parca and Pyroscope, and the /v1 GETs, so a
// fleet's engines read every host without a login. It only reads: any
// other method answers 405 (ErrReadOnly), and what changes state or starts
// work (captures, counters enable, bench runs) stays on the unix socket.
// TLS and basic auth are exporter-toolkit's, from --web.config.file.

// WebConfig configures the TCP listener.
type WebConfig struct {
	// ListenAddress is host:port; "" leaves the listener off.
	ListenAddress string
	// ConfigFile is exporter-toolkit's web config (TLS, basic auth); ""
	// serves plain HTTP.
	ConfigFile string
	// MaxPrograms is how many programs get series of their own in
	// /metrics; the rest are summed into id="other".
	MaxPrograms int
	// MaxRequests is how many requests are answered at once; more get 503.
	MaxRequests int
}

// Defaults of the web flags.
const (
	DefaultWebMaxPrograms = 2000
	DefaultWebMaxRequests = 4
	// defaultPprofSeconds is Go's net/http/pprof default, capped by
	// --profile.limit.
	defaultPprofSeconds = 30
)

// validate fills defaults and checks the flags, the web config file
// included (its certificates are read), so a bad file stops the daemon at
// start with one line.
func (c *WebConfig) validate() error {
	if c.MaxPrograms == 0 {
		c.MaxPrograms = DefaultWebMaxPrograms
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultWebMaxRequests
	}
	if c.MaxPrograms < 1 {
		return fmt.Errorf("%w: --web.max-programs %d must be at least 1", ErrBadConfig, c.MaxPrograms)
	}
	if c.MaxRequests < 1 {
		return fmt.Errorf("%w: --web.max-requests %d must be at least 1", ErrBadConfig, c.MaxRequests)
	}
	if c.ListenAddress == "" {
		if c.ConfigFile != "" {
			return fmt.Errorf("%w: --web.config.file needs --web.listen-address", ErrBadConfig)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		return fmt.Errorf("%w: --web.listen-address %q: %w", ErrBadConfig, c.ListenAddress, err)
	}
	if err := web.Validate(c.ConfigFile); err != nil {
		return fmt.Errorf("%w: --web.config.file %s: %s", ErrBadConfig, c.ConfigFile, oneLine(err))
	}
	return nil
}

// oneLine joins the lines of err's message (YAML errors span several).
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// startWeb opens the TCP listener, if configured, and serves it until the
// returned stop is called. The address is bound here, so a port in use
// fails the start; exporter-toolkit's web.Serve then does TLS and auth.
func (d *Daemon) startWeb() (stop func(), err error) {
	c := d.cfg.Web
	if c.ListenAddress == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", c.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("%w: --web.listen-address: %w", ErrBadConfig, err)
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
func (d *Daemon) webRoutes() http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerForTransactional(d.metrics, promhttp.HandlerOpts{
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
			reply(w, nil, fmt.Errorf("%w: %s %s", ErrReadOnly, r.Method, r.URL.Path))
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
			reply(w, nil, fmt.Errorf("%w: at most %d at once (--web.max-requests)", ErrTooManyScrapes, n))
		}
	})
}

// slogPrinter logs promhttp's errors through the daemon's logger.
type slogPrinter struct{ d *Daemon }

func (p slogPrinter) Println(v ...any) { p.d.cfg.Logger.Warn("metrics", "err", fmt.Sprint(v...)) }
