package daemon_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// headPage finds, in the newest committed state of a bbolt file, the page
// holding the "head" bucket (open chunks): its own root page, or the root
// bucket's page where it is inline.
func headPage(b []byte) int {
	le := binary.LittleEndian
	const pageSize = 4096
	var txid, root uint64
	for i := range 2 {
		m := b[i*pageSize+16:]
		if le.Uint32(m) == 0xED0CDAED && le.Uint64(m[48:]) >= txid {
			txid, root = le.Uint64(m[48:]), le.Uint64(m[16:])
		}
	}
	p := b[int(root)*pageSize:]
	if le.Uint16(p[8:]) != 0x02 {
		return int(root) // a branch root bucket: damage it whole
	}
	for i := range int(le.Uint16(p[10:])) {
		e := p[16+i*16:]
		pos, ksize := int(le.Uint32(e[4:])), int(le.Uint32(e[8:]))
		k := p[16+i*16+pos : 16+i*16+pos+ksize]
		if string(k) == "head" {
			if r := le.Uint64(p[16+i*16+pos+ksize:]); r != 0 {
				return int(r)
			}
		}
	}
	return int(root)
}

// TestDamageWhileRunning overwrites the page of the open chunks under a
// running daemon: the daemon stays up, says the store is damaged (status,
// log), answers history with a clear error, keeps sampling and serving
// live figures, and writes nothing more into the file.
func TestDamageWhileRunning(t *testing.T) {
	privtest.Root(t)
	state := t.TempDir()
	name := uniqueName("e2e_dr")
	prog, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	d := startDaemon(t, state, "--profile.every", "0")
	privtest.Run(prog, 10)
	eventually(t, "the daemon to store 10 runs", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.RunCnt == 10
	})
	path := filepath.Join(state, daemon.StoreFile)
	var st api.Status
	// The page moves with every commit: stop the daemon, damage the page
	// its newest commit uses, let it go on; try again if a commit in
	// flight had already moved it.
	for try := 0; st.StoreDamaged == "" && try < 5; try++ {
		d.cmd.Process.Signal(syscall.SIGSTOP)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(bytes.Repeat([]byte{0xA5}, 64), int64(headPage(b))*4096)
		f.Close()
		d.cmd.Process.Signal(syscall.SIGCONT)
		privtest.Run(prog, 5) // a change the next tick must write
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && d.query(&st, "status") == nil && st.StoreDamaged == "" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if st.StoreDamaged == "" {
		t.Fatalf("status does not say the store is damaged after 5 tries\n%s", d.stderr)
	}
	t.Logf("status: store_damaged %q", st.StoreDamaged)
	if !strings.Contains(d.stderr.String(), "store found damaged while running") {
		t.Errorf("the log does not say the store is damaged:\n%s", d.stderr)
	}
	before, _ := os.ReadFile(path)

	// History reads the damaged page: a clear error, and the daemon lives.
	_, errOut, code := run(bin.cli, "--socket", d.socket, "history", name, "--since", "1h")
	if code == 0 || len(strings.Split(strings.TrimSpace(errOut), "\n")) != 1 || strings.Contains(errOut, "runtime error") || strings.Contains(errOut, "goroutine") {
		t.Errorf("history on the damaged page: exit %d, %q; want one line and a non-zero exit", code, errOut)
	}
	// Live figures go on: runs made now show up.
	privtest.Run(prog, 100)
	eventually(t, "live figures to show 115 runs", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.RunCnt == 115
	})
	out := d.cli(t, "status")
	if !strings.Contains(out, "store damage") || !strings.Contains(out, "salvage") {
		t.Errorf("bpfperf status does not show the damage:\n%s", out)
	}
	time.Sleep(time.Second) // five more ticks
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the daemon wrote into the store after finding it damaged")
	}
	if d.cmd.ProcessState != nil {
		t.Fatalf("bpfperfd died:\n%s", d.stderr)
	}
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("stop: %v\n%s", err, d.stderr)
	}
}

// TestStoreRemovedWhileRunning removes the store file under a running
// daemon (a state directory wiped by hand, a tmpfiles clean-up): the
// daemon stays up and says so, in status at once and in its log within
// one housekeeping pass, instead of writing on into a file nobody can
// open again.
func TestStoreRemovedWhileRunning(t *testing.T) {
	privtest.Root(t)
	state := t.TempDir()
	d := startDaemon(t, state, "--profile.every", "0")
	var st api.Status
	d.json(t, &st, "status")
	if st.StoreGone != "" {
		t.Fatalf("store_gone %q before anything was removed", st.StoreGone)
	}
	if err := os.Remove(filepath.Join(state, daemon.StoreFile)); err != nil {
		t.Fatal(err)
	}
	d.json(t, &st, "status")
	if !strings.Contains(st.StoreGone, "removed") {
		t.Errorf("status store_gone = %q, want it to say the file was removed", st.StoreGone)
	}
	if out := d.cli(t, "status"); !strings.Contains(out, "store gone") || !strings.Contains(out, "restart") {
		t.Errorf("bpfperf status does not say the store is gone:\n%s", out)
	}
	eventuallyFor(t, 15*time.Second, "the log to say the store file was removed", func() bool {
		return strings.Contains(d.stderr.String(), "the store file was removed while open")
	})
	if d.cmd.ProcessState != nil {
		t.Fatalf("bpfperfd died:\n%s", d.stderr)
	}
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("stop: %v\n%s", err, d.stderr)
	}
}
