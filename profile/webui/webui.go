// Package webui serves pprof's web UI for one profile: on a loopback port
// of its own for `bpfperf profile view` (Serve), and as handlers that the
// daemon's dashboard mounts under its own listener (Handlers). It is apart
// from package profile so that what only records profiles does not link
// pprof's driver.
package webui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"
)

// Serve serves pprof's web UI (github.com/google/pprof/driver) for p
// on addr, a loopback host:port (port 0 picks a free one), until ctx ends.
// ready, if not nil, gets the UI's URL once it listens: print it, or open
// a browser on it. Only loopback clients are served. The driver keeps
// global state: serve one UI per process.
func Serve(ctx context.Context, p *profile.Profile, addr string, ready func(url string)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("web ui address %q: %w", addr, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("web ui address %q: not a loopback address", addr)
	}
	ui := &quietUI{}
	err = driver.PProf(&driver.Options{
		Flagset: &webFlags{http: addr},
		Fetch:   fetcher{p},
		Sym:     noSymbolizer{},
		UI:      ui,
		HTTPServer: func(args *driver.HTTPServerArgs) error {
			return serveUI(ctx, args, ready)
		},
	})
	if err != nil {
		return fmt.Errorf("pprof web ui: %w", err)
	}
	return nil
}

// Handlers are pprof's web UI views of p (flamegraph, top, source, peek,
// disasm, graph, download), keyed by their path ("/flamegraph"), for a
// server of the caller's to mount. Views that write pprof's settings file
// (saveconfig, deleteconfig) are left out: whoever browses a dashboard
// changes nothing. The driver's report options are global to the process,
// but each request carries its own in its URL, so several profiles can be
// served at once.
func Handlers(p *profile.Profile) (map[string]http.Handler, error) {
	// The driver refuses to serve without a config directory for its
	// settings file, and a system service has no $HOME: point it at one
	// that does not exist, so it reads no settings (and, with saveconfig
	// left out, writes none).
	if _, err := os.UserConfigDir(); err != nil {
		os.Setenv("XDG_CONFIG_HOME", "/nonexistent/bpfperf-pprof")
	}
	var handlers map[string]http.Handler
	err := driver.PProf(&driver.Options{
		// A fixed port: the driver picks a free one (by listening) for
		// an empty one, and nothing listens on this one.
		Flagset: &webFlags{http: "127.0.0.1:1"},
		Fetch:   fetcher{p},
		Sym:     noSymbolizer{},
		UI:      &quietUI{},
		HTTPServer: func(args *driver.HTTPServerArgs) error {
			handlers = args.Handlers
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pprof web ui: %w", err)
	}
	delete(handlers, "/saveconfig")
	delete(handlers, "/deleteconfig")
	return handlers, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serveUI(ctx context.Context, args *driver.HTTPServerArgs, ready func(string)) error {
	ln, err := net.Listen("tcp", args.Hostport)
	if err != nil {
		return err
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host, _, err := net.SplitHostPort(req.RemoteAddr)
		if err != nil || !isLoopback(host) {
			http.Error(w, "permission denied", http.StatusForbidden)
			return
		}
		h := args.Handlers[req.URL.Path]
		if h == nil {
			http.NotFound(w, req)
			return
		}
		h.ServeHTTP(w, req)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", handler))
	mux.Handle("/", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if ready != nil {
		ready("http://" + ln.Addr().String() + "/ui/")
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// webFlags is the driver's command line: -http=addr -no_browser
// -symbolize=none, and the profile as the only source.
type webFlags struct{ http string }

func (f *webFlags) Bool(name string, def bool, _ string) *bool {
	v := def || name == "no_browser"
	return &v
}
func (f *webFlags) Int(_ string, def int, _ string) *int             { return &def }
func (f *webFlags) Float64(_ string, def float64, _ string) *float64 { return &def }
func (f *webFlags) String(name, def, _ string) *string {
	switch name {
	case "http":
		def = f.http
	case "symbolize":
		def = "none"
	}
	return &def
}
func (f *webFlags) StringList(_, def, _ string) *[]*string { return &[]*string{&def} }
func (f *webFlags) ExtraUsage() string                     { return "" }
func (f *webFlags) AddExtraUsage(string)                   {}
func (f *webFlags) Parse(func()) []string                  { return []string{"bpfperf"} }

type fetcher struct{ p *profile.Profile }

func (f fetcher) Fetch(string, time.Duration, time.Duration) (*profile.Profile, string, error) {
	return f.p.Copy(), "", nil
}

// noSymbolizer: profiles come symbolized, and [bpf] has no file to read.
type noSymbolizer struct{}

func (noSymbolizer) Symbolize(string, driver.MappingSources, *profile.Profile) error { return nil }

// quietUI keeps the driver from printing or reading a terminal.
type quietUI struct{ errs strings.Builder }

func (u *quietUI) ReadLine(string) (string, error)     { return "", io.EOF }
func (u *quietUI) Print(...any)                        {}
func (u *quietUI) PrintErr(args ...any)                { fmt.Fprintln(&u.errs, args...) }
func (u *quietUI) IsTerminal() bool                    { return false }
func (u *quietUI) WantBrowser() bool                   { return false }
func (u *quietUI) SetAutoComplete(func(string) string) {}
