package daemon_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	bolt "go.etcd.io/bbolt"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// fillDisk writes a file until the file system is full and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	// Also the last partial block.
	for {
		if _, err := f.Write(block[:512]); err != nil {
			break
		}
	}
	return path
}

func TestDiskFull(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	state := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", state).CombinedOutput(); err != nil {
		privtest.Skip(t, "mount a small tmpfs: "+string(out))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", state).Run() })

	// A hundred busy programs make the store grow every few ticks, so
	// writes need new pages while the disk is full. The store's free pages
	// take 30-40 s to fill, most of the test's time, with four hundred
	// as with a hundred (measured): chunks grow by a few bytes a sample.
	name := uniqueName("e2e_full")
	prog, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	progs := []*ebpf.Program{prog}
	for i := range 99 {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("e2e_full%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		progs = append(progs, p)
	}
	d := startDaemon(t, state)
	busy := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			for _, p := range progs {
				privtest.Run(p, 3)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	busy(time.Second)

	filler := fillDisk(t, state)
	fullAt := time.Now()
	var reportedAt time.Time
	defer func() {
		t.Logf("the daemon reported the full disk after %v", reportedAt.Sub(fullAt).Round(time.Millisecond))
	}()
	var st api.Status
	// Writes fail once bbolt must grow the file, which it does by
	// doubling: the store's free pages may take a while to fill (settling
	// the programs' identities, a second in, rewrites their records and
	// may have doubled it just before).
	for deadline := time.Now().Add(60 * time.Second); ; {
		busy(100 * time.Millisecond)
		st = api.Status{}
		if d.query(&st, "status") == nil && strings.Contains(st.LastError, "no space left") {
			reportedAt = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the daemon to report the full disk")
		}
	}
	busy(2 * time.Second)
	// Reads keep working while writes fail.
	var rows []api.ProgRow
	d.json(t, &rows, "progs")
	var before []api.HistoryPoint
	d.json(t, &before, "history", name, "--since", "1m")

	os.Remove(filler)
	freedAt := time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for st = (api.Status{}); d.query(&st, "status") != nil || st.LastError != ""; st = (api.Status{}) {
		if time.Now().After(deadline) {
			df, _ := exec.Command("df", state).CombinedOutput()
			ls, _ := exec.Command("ls", "-la", state).CombinedOutput()
			t.Fatalf("the daemon does not write again: %s\n%s\n%s%s", st.LastError, d.stderr, df, ls)
		}
		time.Sleep(100 * time.Millisecond)
	}
	busy(500 * time.Millisecond)

	// The samples taken while the disk was full were kept and written.
	var after []api.HistoryPoint
	d.json(t, &after, "history", name, "--since", "1m")
	during := 0
	for _, p := range after {
		if p.Time.After(fullAt.Add(time.Second)) && p.Time.Before(freedAt) {
			during++
		}
	}
	if during < 5 {
		t.Errorf("%d samples from the %v the disk was full, want every tick's", during, freedAt.Sub(fullAt))
	}
	logs := d.stderr.String()
	if n := strings.Count(logs, "store write failed"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "store writable again") {
		t.Errorf("no recovery line in the log:\n%s", logs)
	}
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs)
	}
	out, errOut, code := run(bin.cli, "store", "check", "--file", filepath.Join(state, daemon.StoreFile))
	if code != 0 {
		t.Errorf("store check after a full disk: %s %s", out, errOut)
	}
}

func TestBadStoreFiles(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	// A real store, written by a daemon.
	good := t.TempDir()
	d := startDaemon(t, good)
	time.Sleep(600 * time.Millisecond)
	d.stop(t, syscall.SIGTERM)
	valid, err := os.ReadFile(filepath.Join(good, daemon.StoreFile))
	if err != nil {
		t.Fatal(err)
	}

	// The same store, stamped with a schema from the future.
	newer := filepath.Join(t.TempDir(), "newer.db")
	os.WriteFile(newer, valid, 0o600)
	b, err := bolt.Open(newer, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte{0, 0, 0, 99}) })
	b.Close()
	future, _ := os.ReadFile(newer)

	for _, c := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"newer schema", future, "written by a newer bpfperf"},
		{"truncated", valid[:highWater(valid)/2], "file is truncated"},
		{"zeroed meta", append(make([]byte, 8192), valid[8192:]...), "not a bbolt store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			path := filepath.Join(state, daemon.StoreFile)
			os.WriteFile(path, c.content, 0o600)
			stdout, stderr, code := run(bin.daemon, "--state-dir", state, "--socket", filepath.Join(state, "s.sock"), "--interval", "200ms")
			oneLineError(t, "bpfperfd on a "+c.name+" store", stdout, stderr, code, c.want)
			if strings.Contains(stderr, "goroutine") {
				t.Errorf("panic:\n%s", stderr)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, c.content) {
				t.Error("the daemon changed a store it could not open")
			}
			out, errOut, code := run(bin.cli, "store", "check", "--file", path)
			if code == 0 || !strings.Contains(out+errOut, c.want) {
				t.Errorf("store check on a %s store: exit %d\n%s%s", c.name, code, out, errOut)
			}
		})
	}
}

// highWater is where the pages in use end in a bbolt file, by its newest
// meta page: the file itself is grown in steps and may end far past it,
// so a cut must fall below this to truncate anything.
func highWater(b []byte) int {
	le := binary.LittleEndian
	const pageSize = 4096
	var txid, hwm uint64
	for i := range 2 {
		m := b[i*pageSize+16:]
		if le.Uint32(m) == 0xED0CDAED && le.Uint64(m[48:]) >= txid {
			txid, hwm = le.Uint64(m[48:]), le.Uint64(m[40:])
		}
	}
	return int(hwm) * pageSize
}
