// Package systemd holds bpfperfd's unit files; this test checks them with
// systemd's own tools.
package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// maxExposure is the highest `systemd-analyze security` score we accept.
const maxExposure = 2.0

// unitCopy writes the unit with ExecStart pointing at an executable that
// exists, because verify checks it.
func unitCopy(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		privtest.Skip(t, "systemd-analyze not installed (apt-get install systemd)")
	}
	b, err := os.ReadFile("bpfperfd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(b), "/usr/local/bin/bpfperfd", "/bin/true")
	path := filepath.Join(t.TempDir(), "bpfperfd.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUnitVerifies(t *testing.T) {
	out, err := exec.Command("systemd-analyze", "verify", unitCopy(t)).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestUnitIsHardened(t *testing.T) {
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", unitCopy(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	if score > maxExposure {
		t.Errorf("exposure %.1f, want <= %.1f:\n%s", score, maxExposure, out)
	}
	t.Logf("systemd-analyze security exposure: %.1f", score)
	unit, _ := os.ReadFile("bpfperfd.service")
	for _, want := range []string{"Type=notify", "WatchdogSec=", "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_ADMIN CAP_SYSLOG\n", "StateDirectory=bpfperf", "RuntimeDirectory=bpfperf"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
}

// `make install` must honour DESTDIR and PREFIX, and point the unit's
// ExecStart at the installed binary.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		privtest.Skip(t, "make not installed")
	}
	dest := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "install", "DESTDIR="+dest, "PREFIX=/usr")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/bin/bpfperfd", "usr/bin/bpfperf", "usr/lib/systemd/system/bpfperfd.service", "usr/lib/sysusers.d/bpfperf.conf"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "usr/lib/systemd/system/bpfperfd.service"))
	if !strings.Contains(string(unit), "ExecStart=/usr/bin/bpfperfd ") {
		t.Errorf("installed unit does not start /usr/bin/bpfperfd:\n%s", unit)
	}
}
