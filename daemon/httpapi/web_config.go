package httpapi

import (
	"fmt"
	"net"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/bpfperf/bpfperf/daemon/errs"
)

// WebConfig configures the opt-in TCP listener.
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
)

// Validate fills defaults and checks the flags, the web config file
// included (its certificates are read), so a bad file stops the daemon at
// start with one line.
func (c *WebConfig) Validate() error {
	if c.MaxPrograms == 0 {
		c.MaxPrograms = DefaultWebMaxPrograms
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultWebMaxRequests
	}
	if c.MaxPrograms < 1 {
		return fmt.Errorf("%w: --web.max-programs %d must be at least 1", errs.BadConfig, c.MaxPrograms)
	}
	if c.MaxRequests < 1 {
		return fmt.Errorf("%w: --web.max-requests %d must be at least 1", errs.BadConfig, c.MaxRequests)
	}
	if c.ListenAddress == "" {
		if c.ConfigFile != "" {
			return fmt.Errorf("%w: --web.config.file needs --web.listen-address", errs.BadConfig)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		return fmt.Errorf("%w: --web.listen-address %q: %w", errs.BadConfig, c.ListenAddress, err)
	}
	if err := web.Validate(c.ConfigFile); err != nil {
		return fmt.Errorf("%w: --web.config.file %s: %s", errs.BadConfig, c.ConfigFile, oneLine(err))
	}
	return nil
}

// oneLine joins the lines of err's message (YAML errors span several).
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
