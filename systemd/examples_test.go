package systemd

import (
	"os/exec"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestPrometheusExample: the shipped Prometheus scrape config is valid to
// promtool.
func TestPrometheusExample(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		privtest.Skip(t, "promtool not installed (sudo make deps installs Debian's prometheus)")
	}
	if out, err := exec.Command(promtool, "check", "config", "examples/prometheus.yml").CombinedOutput(); err != nil {
		t.Errorf("promtool check config examples/prometheus.yml: %v\n%s", err, out)
	}
}
