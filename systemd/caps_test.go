package systemd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// The unit's capability bounding set is all bpfperfd gets under systemd:
// run the daemon with exactly that set (setpriv) and check it samples a real
// program, stores it and profiles.
func TestUnitCapabilitiesSuffice(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		privtest.Skip(t, "setpriv not installed (util-linux)")
	}
	unit, err := os.ReadFile("bpfperfd.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.*)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("unit has no CapabilityBoundingSet")
	}
	bounding := "-all"
	for _, c := range strings.Fields(string(m[1])) {
		bounding += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	daemon, cli := filepath.Join(dir, "bpfperfd"), filepath.Join(dir, "bpfperf")
	for out, pkg := range map[string]string{daemon: "../cmd/bpfperfd", cli: "../cmd/bpfperf"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	prog, err := privtest.LoadSocketFilter("unit_caps")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, _ := prog.Info()
	id, _ := info.ID()

	sock := filepath.Join(dir, "api.sock")
	var stderr bytes.Buffer
	cmd := exec.Command("setpriv", "--bounding-set="+bounding, "--inh-caps=-all", daemon,
		"--state-dir", dir, "--socket", sock, "--interval", "200ms", "--profile.every", "1s")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	query := func(v any, args ...string) error {
		out, err := exec.Command(cli, append([]string{"--socket", sock}, append(args, "-o", "json")...)...).Output()
		if err != nil {
			return fmt.Errorf("bpfperf %v: %v", args, err)
		}
		return json.Unmarshal(out, v)
	}
	var runCnt uint64
	var profiles []map[string]any
	deadline := time.Now().Add(15 * time.Second)
	for {
		privtest.Run(prog, 3)
		var p struct {
			RunCnt uint64 `json:"run_cnt"`
		}
		if query(&p, "show", fmt.Sprint(id)) == nil {
			runCnt = p.RunCnt
		}
		query(&profiles, "profile", "list", "--since", "1m")
		if runCnt > 0 && len(profiles) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the unit's capabilities (%s): run_cnt %d, %d profiles\n%s", m[1], runCnt, len(profiles), stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var st struct {
		StatsMode string `json:"stats_mode"`
	}
	if err := query(&st, "status"); err != nil || st.StatsMode != "fd" {
		t.Errorf("stats mode %q (%v), want fd", st.StatsMode, err)
	}
}
