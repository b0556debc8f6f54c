package collectors

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// unprivEnv tells a child copy of this test binary, running as nobody, to
// run the checks below against the proc root it names.
const unprivEnv = "BPFPERF_COLLECTORS_UNPRIVILEGED_ROOT"

// TestUnprivileged runs this test again as nobody and checks that every
// bpf(2) refusal matches ErrNotPermitted, and that auto stats mode falls
// back to the sysctl when the fd call is refused.
func TestUnprivileged(t *testing.T) {
	if root := os.Getenv(unprivEnv); root != "" {
		checkUnprivileged(t, root)
		return
	}
	privtest.Root(t)

	// The go-build dir is private to root: copy the binary where nobody can
	// run it, next to a fake /proc with a writable stats sysctl.
	dir, err := os.MkdirTemp("", "bpfperf-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sysctl := filepath.Join(dir, "proc/sys/kernel/bpf_stats_enabled")
	if err := os.MkdirAll(filepath.Dir(sysctl), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sysctl, []byte("0\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "collectors.test")
	copyFile(t, bin)
	for _, p := range []string{dir, sysctl} {
		os.Chmod(p, 0o777) // umask-proof: nobody writes the fixture
	}
	cmd := exec.Command(bin, "-test.run=^TestUnprivileged$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), unprivEnv+"="+filepath.Join(dir, "proc"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnprivileged") {
		t.Fatalf("unprivileged child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func copyFile(t *testing.T, dst string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkUnprivileged(t *testing.T, procRoot string) {
	if os.Geteuid() == 0 {
		t.Fatal("child runs as root")
	}
	if _, err := Sweep(nil); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("Sweep: %v, want ErrNotPermitted", err)
	}
	if _, err := Links(); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("Links: %v, want ErrNotPermitted", err)
	}
	if _, err := ReadMeta(1); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("ReadMeta: %v, want ErrNotPermitted", err)
	}
	if it, err := NewProgIter(); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("NewProgIter: %v, want ErrNotPermitted", err)
		if it != nil {
			it.Close()
		}
	}
	if _, err := EnableStats(StatsConfig{ProcRoot: procRoot, Mode: "fd"}); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("EnableStats(fd): %v, want ErrNotPermitted", err)
	}

	sysctl := filepath.Join(procRoot, "sys/kernel/bpf_stats_enabled")
	s, err := EnableStats(StatsConfig{ProcRoot: procRoot, Mode: "auto"})
	if err != nil {
		t.Fatalf("EnableStats(auto): %v", err)
	}
	if s.Mode() != StatsSysctl {
		t.Errorf("auto mode without privilege chose %s, want sysctl", s.Mode())
	}
	t.Log(s.Detail())
	if b, _ := os.ReadFile(sysctl); string(b) != "1\n" {
		t.Errorf("fixture sysctl %q after enable, want 1", b)
	}
	if err := s.Restore(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(sysctl); string(b) != "0\n" {
		t.Errorf("fixture sysctl %q after Restore, want 0", b)
	}
}
