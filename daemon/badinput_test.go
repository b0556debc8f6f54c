package daemon_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// oneLineError checks a failed command: non-zero exit and exactly one line
// on stderr that names the problem.
func oneLineError(t *testing.T, what string, stdout, stderr string, code int, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code == 0 || len(lines) != 1 || !strings.Contains(stderr, want) {
		t.Errorf("%s: exit %d, stderr %q (stdout %q); want a non-zero exit and one line containing %q", what, code, stderr, stdout, want)
	}
}

func TestCLIBadInput(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir())
	twin := uniqueName("e2e_twin")
	for range 2 {
		p, err := privtest.LoadSocketFilter(twin)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
	}
	eventually(t, "both twins to be sampled", func() bool {
		out, _, _ := run(bin.cli, "--socket", d.socket, "progs")
		return strings.Count(out, twin) == 2
	})

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "no_such_prog_xyz"}, `unknown program "no_such_prog_xyz"`},
		{[]string{"show", "4000000000"}, "unknown program"},
		{[]string{"show", twin}, "ambiguous program"},
		{[]string{"history", twin}, "ambiguous program"},
		{[]string{"show"}, "missing PROG"},
		{[]string{"show", "a", "b"}, `"b" is one too many`},
		{[]string{"history", twin + "@0000000000000000"}, "unknown program"},
		{[]string{"history", "x", "--since", "yesterday"}, "--since"},
		{[]string{"history", "x", "--since", "-5m"}, "--since"},
		{[]string{"history", "x", "--since", "1h", "--until", "2h"}, "is not after --since"},
		{[]string{"history", "x", "--step", "0s"}, "--step"},
		{[]string{"history", "x", "--step", "fast"}, "--step"},
		{[]string{"progs", "-o", "yaml"}, `-o "yaml"`},
		{[]string{"triggers", "no_such_prog_xyz"}, `unknown program "no_such_prog_xyz"`},
		{[]string{"triggers", "--workload", "no-such.service"}, "none lies wholly in the range yet"},
		{[]string{"triggers", "--since", "yesterday"}, "--since"},
		{[]string{"owners", "--triggered", "--owner", "no-such.service"}, "none lies wholly in the range yet"},
		{[]string{"progs", "--no-such-flag"}, "no-such-flag"},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, "bpfperf "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}

	stdout, stderr, code := run(bin.cli, "--socket", filepath.Join(t.TempDir(), "none.sock"), "status")
	oneLineError(t, "status without a daemon", stdout, stderr, code, "no bpfperfd running")
}

func TestDaemonBadInput(t *testing.T) {
	privtest.Root(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	sock := filepath.Join(dir, "x.sock")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-dir", filepath.Join(dir, "missing"), "--socket", sock}, "state dir"},
		{[]string{"--state-dir", file, "--socket", sock}, "not a directory"},
		{[]string{"--state-dir", dir, "--socket", sock, "--interval", "1ms"}, "--interval"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats-mode", "magic"}, "--stats-mode"},
		{[]string{"--state-dir", dir, "--socket", sock, "--sweep", "magic"}, "--sweep"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.duty", "0%"}, "--stats.duty"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.duty", "101%"}, "--stats.duty"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.duty", "half"}, "--stats.duty"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.budget", "-1%"}, "--stats.budget"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.budget", "2 CPUs"}, "--stats.budget"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.budget", "101"}, "--stats.budget"},
		{[]string{"--state-dir", dir, "--socket", sock, "--stats.budget", "1%", "--stats.duty", "10%"}, "--stats.duty and --stats.budget: set one"},
		{[]string{"--state-dir", dir, "--socket", sock, "--log-level", "loud"}, "--log-level"},
		{[]string{"--state-dir", dir, "--socket", filepath.Join(dir, "no/dir/x.sock")}, "socket directory"},
		{[]string{"--bogus"}, "bogus"},
	} {
		stdout, stderr, code := run(bin.daemon, c.args...)
		oneLineError(t, "bpfperfd "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}

	t.Run("read-only state dir", func(t *testing.T) {
		ro := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro).CombinedOutput(); err != nil {
			privtest.Skip(t, "mount a read-only tmpfs: "+string(out))
		}
		defer exec.Command("umount", ro).Run()
		stdout, stderr, code := run(bin.daemon, "--state-dir", ro, "--socket", sock)
		oneLineError(t, "read-only state dir", stdout, stderr, code, "not writable")
	})

	t.Run("corrupt store", func(t *testing.T) {
		state := t.TempDir()
		garbage := bytes.Repeat([]byte("not a bbolt file "), 1000)
		path := filepath.Join(state, "bpfperf.db")
		os.WriteFile(path, garbage, 0o600)
		stdout, stderr, code := run(bin.daemon, "--state-dir", state, "--socket", filepath.Join(state, "s.sock"))
		oneLineError(t, "corrupt store", stdout, stderr, code, "is unreadable: not a bbolt store")
		if now, _ := os.ReadFile(path); !bytes.Equal(now, garbage) {
			t.Error("the daemon changed a store file it could not read")
		}
	})

	t.Run("not privileged", func(t *testing.T) {
		state := t.TempDir()
		os.Chmod(state, 0o777)
		cmd := exec.Command(bin.daemon, "--state-dir", state, "--socket", filepath.Join(state, "s.sock"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if err != nil {
			code = 1
		}
		oneLineError(t, "bpfperfd as nobody", "", stderr.String(), code, "not privileged")
	})

	t.Run("in use", func(t *testing.T) {
		first := startDaemon(t, t.TempDir())
		// Same socket, other state dir.
		stdout, stderr, code := run(bin.daemon, "--state-dir", t.TempDir(), "--socket", first.socket)
		oneLineError(t, "second daemon on the same socket", stdout, stderr, code, "socket is in use")
		// Same state dir, other socket.
		stdout, stderr, code = run(bin.daemon, "--state-dir", first.stateDir, "--socket", filepath.Join(t.TempDir(), "other.sock"))
		oneLineError(t, "second daemon on the same state dir", stdout, stderr, code, "locked by another bpfperfd")
		// The first daemon is unharmed.
		first.cli(t, "status")
		if err := first.stop(t, syscall.SIGTERM); err != nil {
			t.Errorf("first daemon: %v\n%s", err, first.stderr)
		}
	})

	t.Run("second on the host", func(t *testing.T) {
		lock := filepath.Join(t.TempDir(), "bpfperfd.lock")
		first := startDaemon(t, t.TempDir(), "--host-lock", lock)
		// Its own socket and state dir: refused all the same.
		stdout, stderr, code := run(bin.daemon, "--state-dir", t.TempDir(), "--socket", filepath.Join(t.TempDir(), "second.sock"), "--host-lock", lock)
		oneLineError(t, "second daemon on the host", stdout, stderr, code, "one bpfperfd per host: another one runs here (pid "+strconv.Itoa(first.cmd.Process.Pid)+", socket "+first.socket)
		first.cli(t, "status")
		// A wait that runs out is refused all the same, saying it waited.
		_, stderr, code = run(bin.daemon, "--state-dir", t.TempDir(), "--socket", filepath.Join(t.TempDir(), "third.sock"), "--host-lock", lock, "--host-lock-wait", "500ms")
		if code == 0 || !strings.Contains(stderr, "waiting for the host lock") || !strings.Contains(stderr, "one bpfperfd per host: another one runs here (pid "+strconv.Itoa(first.cmd.Process.Pid)) || !strings.Contains(stderr, "waited 500ms") {
			t.Errorf("a wait of 500ms that runs out: exit %d, stderr:\n%s", code, stderr)
		}

		// With --host-lock-wait one waits instead, says so, and starts
		// once the first is gone: the kernel dropped its lock.
		state := t.TempDir()
		sock := filepath.Join(state, "api.sock")
		logPath := filepath.Join(state, "stderr")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer logFile.Close()
		waiter := exec.Command(bin.daemon, "--state-dir", state, "--socket", sock, "--interval", "200ms", "--host-lock", lock, "--host-lock-wait", "1m")
		waiter.Stderr = logFile
		if err := waiter.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- waiter.Wait() }()
		defer func() {
			waiter.Process.Signal(syscall.SIGTERM)
			<-exited
		}()
		waitLog := func(want string, within time.Duration) {
			t.Helper()
			for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
				b, _ := os.ReadFile(logPath)
				if strings.Contains(string(b), want) {
					return
				}
				select {
				case err := <-exited:
					t.Fatalf("the waiting daemon exited (%v) before its log said %q:\n%s", err, want, b)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the waiting daemon's log does not say %q in %v:\n%s", want, within, b)
				}
			}
		}
		waitLog("waiting for the host lock: another bpfperfd runs here", 10*time.Second)
		if _, _, code := run(bin.cli, "--socket", sock, "status"); code == 0 {
			t.Error("the waiting daemon answers while the first one runs")
		}
		if err := first.stop(t, syscall.SIGTERM); err != nil {
			t.Errorf("first daemon: %v\n%s", err, first.stderr)
		}
		stopped := time.Now()
		waitLog("host lock taken", 5*time.Second)
		for deadline := time.Now().Add(startWait); ; time.Sleep(100 * time.Millisecond) {
			if _, _, code := run(bin.cli, "--socket", sock, "status"); code == 0 {
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("the waiting daemon does not answer %v after the first stopped:\n%s", startWait, b)
			}
		}
		t.Logf("the waiting daemon answered %v after the first one stopped", time.Since(stopped).Round(time.Millisecond))
	})
}
