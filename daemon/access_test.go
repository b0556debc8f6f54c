package daemon_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestSocketAccess: the API socket is 0660, owned by root and the
// --socket-group; a user outside the group is refused with one line that
// says what to do, a user in it is served, and a request that changes
// state is logged with the uid and pid that sent it (SO_PEERCRED).
func TestSocketAccess(t *testing.T) {
	privtest.Root(t)
	// nobody must reach the socket: a state dir others may traverse.
	state, err := os.MkdirTemp("", "bpfperf-access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	os.Chmod(state, 0o755)
	const group, gid = "nogroup", 65534
	d := startDaemon(t, state, "--socket-group", group)

	fi, err := os.Stat(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o660 || st.Uid != 0 || st.Gid != gid {
		t.Errorf("socket %s: mode %v, owner %d:%d; want 0660 root:%s", d.socket, fi.Mode().Perm(), st.Uid, st.Gid, group)
	}

	asUser := func(gid uint32, args ...string) (string, string, int) {
		cmd := exec.Command(bin.cli, append([]string{"--socket", d.socket}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: gid, Groups: []uint32{}}}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		code := 0
		if err := cmd.Run(); err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		return out.String(), errOut.String(), code
	}
	stdout, stderr, code := asUser(100, "status") // nobody, group users
	oneLineError(t, "status as a user outside the socket's group", stdout, stderr, code, "permission denied")
	if !strings.Contains(stderr, "bpfperf group") {
		t.Errorf("refusal does not say what to do: %q", stderr)
	}
	if stdout, stderr, code := asUser(gid, "status"); code != 0 || !strings.Contains(stdout, "sweep") {
		t.Errorf("status as a user in the socket's group: exit %d\n%s%s", code, stdout, stderr)
	}

	// A change (a profile capture) is logged with who asked; a read is not.
	out := filepath.Join(state, "out")
	os.Mkdir(out, 0o777)
	os.Chmod(out, 0o777)
	if stdout, stderr, code := asUser(gid, "profile", "capture", "--duration", "200ms", "-o", filepath.Join(out, "p.pb.gz")); code != 0 {
		t.Errorf("capture as a user in the socket's group: exit %d: %s%s", code, stdout, stderr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(d.stderr.String(), "uid=65534") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	log := d.stderr.String()
	var audit []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "api request that changes state") {
			audit = append(audit, line)
		}
	}
	if len(audit) != 1 || !strings.Contains(audit[0], "uid=65534") || !strings.Contains(audit[0], "pid=") ||
		!strings.Contains(audit[0], "/v1/profiles/capture") {
		t.Errorf("log of requests that change state: %q, want one line naming the capture, uid=65534 and its pid", audit)
	}
}
