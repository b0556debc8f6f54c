package podnames

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/pods"
)

// cgroup is a container's cgroup as a kubelet with the cgroupfs driver
// makes it.
const cgroup = "/kubepods/besteffort/pod0f1e2d3c-4b5a-4697-8877-665544332211/" +
	"ebeb6f206c6c0123456789abcdef0123456789abcdef0123456789abcdef0123"

// TestLookupNeverWaits: a runtime that accepts and never answers (hung)
// holds up no lookup: each returns at once, the first ones pending while
// the goroutine waits out the call's timeout, then none pending, so no
// identity waits on it; status says why in one line.
func TestLookupNeverWaits(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	n := Open(Config{Socket: sock, Index: pods.Config{Timeout: 300 * time.Millisecond}})
	defer n.Close()
	start := time.Now()
	pod, pending := n.Lookup(cgroup)
	for range 10000 {
		n.Lookup(cgroup)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("10,001 lookups on a hung socket took %s", took)
	}
	if pod != nil || !pending {
		t.Errorf("first lookup: %+v, pending %v; want none, pending", pod, pending)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, pending = n.Lookup(cgroup); !pending {
			break
		}
	}
	if pending {
		t.Fatal("a lookup still pending 5 s after the call's timeout")
	}
	st := n.Status()
	if !strings.Contains(st, "deadline exceeded") || !strings.Contains(st, "named by pod uid and container id") || strings.Contains(st, "\n") {
		t.Errorf("status: %q", st)
	}
	if pod, pending := n.Lookup("/system.slice/cron.service"); pod != nil || pending {
		t.Errorf("a cgroup of no container: %+v, pending %v", pod, pending)
	}
}

// TestNoSocket: a socket that is not there, or names turned off, is one
// line in status and no pod, never pending.
func TestNoSocket(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "containerd.sock")
	for socket, want := range map[string]string{missing: "no such socket", Off: "off (--cri.socket none)"} {
		n := Open(Config{Socket: socket})
		if pod, pending := n.Lookup(cgroup); pod != nil || pending {
			t.Errorf("%s: lookup %+v, pending %v", socket, pod, pending)
		}
		if st := n.Status(); !strings.Contains(st, want) || strings.Contains(st, "\n") {
			t.Errorf("%s: status %q, want one line with %q", socket, st, want)
		}
		if err := n.Close(); err != nil {
			t.Errorf("%s: close: %v", socket, err)
		}
	}
	var none *Names
	if pod, pending := none.Lookup(cgroup); pod != nil || pending || none.Status() != "" || none.Close() != nil {
		t.Error("a nil Names names something")
	}
}

// TestDefaultSocketAppears: with no socket named and none of the usual
// ones there (a runtime started after the daemon), status says so; once
// one appears it is used, without a restart.
func TestDefaultSocketAppears(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	defaults := pods.DefaultSockets
	pods.DefaultSockets = []string{sock}
	defer func() { pods.DefaultSockets = defaults }()
	n := Open(Config{Retry: 50 * time.Millisecond, Index: pods.Config{Timeout: 200 * time.Millisecond}})
	defer n.Close()
	if st := n.Status(); !strings.Contains(st, "no CRI socket at "+sock) {
		t.Errorf("status before the socket: %q", st)
	}
	ln, err := net.Listen("unix", sock) // answers nothing: status names it with its error
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(n.Status(), sock+": ") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := n.Status()
	t.Log(st)
	if !strings.Contains(st, sock+": ") || strings.Contains(st, "no CRI socket") {
		t.Errorf("status once the socket is there: %q", st)
	}
}
