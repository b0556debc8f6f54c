package daemon_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// realStore runs bpfperfd for a few seconds over real programs that run
// between ticks and returns the store it wrote.
func realStore(t *testing.T) []byte {
	state := t.TempDir()
	var names []string
	for i := range 5 {
		name := uniqueName(fmt.Sprintf("dmg_%d", i))
		p, err := privtest.LoadSocketFilter(name)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		names = append(names, name)
		defer func() { _ = p }()
		go func() {
			for range 15 {
				privtest.Run(p, 10)
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	d := startDaemon(t, state)
	time.Sleep(3 * time.Second)
	var p api.ProgDetail
	d.json(t, &p, "show", names[0])
	if p.RunCnt == 0 {
		t.Fatalf("the daemon did not see %s run", names[0])
	}
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.stderr)
	}
	b, err := os.ReadFile(filepath.Join(state, daemon.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type storeCopy struct {
	name string
	data []byte
}

// TestDamagedStoreCopies damages copies of a real store and runs the real
// binaries on each: bpfperfd either refuses the copy in one line with
// exit 65 and leaves it byte for byte, or serves it and stops on SIGTERM,
// after which `store check --file` finds it sound. Neither ever panics,
// faults, hangs or takes more than 10 s. The store package's damage
// tests cover thousands of copies through the library; this runs the
// binaries on a sample of each kind. BPFPERF_DAMAGE_SEED replays a run.
func TestDamagedStoreCopies(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	good := realStore(t)
	const pageSize = 4096
	seed := uint64(time.Now().UnixNano() % 1e9)
	if s, err := strconv.ParseUint(os.Getenv("BPFPERF_DAMAGE_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (BPFPERF_DAMAGE_SEED=%d replays it), store of %d bytes", seed, seed, len(good))
	rng := rand.New(rand.NewPCG(seed, 3))
	flip := func(bit int) []byte {
		c := bytes.Clone(good)
		c[bit/8] ^= 1 << (bit % 8)
		return c
	}
	var branch, leaf []int
	for p := 2; (p+1)*pageSize <= len(good); {
		h := good[p*pageSize:]
		switch binary.LittleEndian.Uint16(h[8:]) {
		case 1:
			branch = append(branch, p)
		case 2:
			leaf = append(leaf, p)
		}
		p += 1 + int(min(binary.LittleEndian.Uint32(h[12:]), 1<<20))
	}
	var copies []storeCopy
	for i := range 6 {
		page, bit := i%2, rng.IntN(80*8)
		copies = append(copies, storeCopy{fmt.Sprintf("meta page %d bit %d", page, bit), flip(page*pageSize*8 + bit)})
	}
	pages := append(append([]int{}, branch...), leaf...)
	for range 6 {
		p, bit := pages[rng.IntN(len(pages))], rng.IntN(16*8)
		copies = append(copies, storeCopy{fmt.Sprintf("header of page %d bit %d", p, bit), flip(p*pageSize*8 + bit)})
	}
	for range 6 {
		p, bit := leaf[rng.IntN(len(leaf))], 16*8+rng.IntN((pageSize-16)*8)
		copies = append(copies, storeCopy{fmt.Sprintf("leaf page %d bit %d", p, bit), flip(p*pageSize*8 + bit)})
	}
	if len(branch) > 0 {
		for range 3 {
			p, bit := branch[rng.IntN(len(branch))], 16*8+rng.IntN((pageSize-16)*8)
			copies = append(copies, storeCopy{fmt.Sprintf("branch page %d bit %d", p, bit), flip(p*pageSize*8 + bit)})
		}
	}
	for _, n := range []int{100, pageSize + 1, len(good) / 2, len(good) - pageSize} {
		copies = append(copies, storeCopy{fmt.Sprintf("truncated to %d bytes", n), good[:n]})
	}
	noise := make([]byte, 64<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	copies = append(copies, storeCopy{"zero length", nil}, storeCopy{"random bytes", noise})

	work := make(chan storeCopy)
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for range 4 {
		wg.Go(func() {
			for c := range work {
				if damagedCopy(t, c) {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range copies {
		work <- c
	}
	close(work)
	wg.Wait()
	t.Logf("%d copies: %d refused, %d served", len(copies), refused, len(copies)-refused)
}

// damagedCopy runs bpfperfd and `store check --file` on one copy and
// reports whether bpfperfd refused it.
func damagedCopy(t *testing.T, c storeCopy) (refused bool) {
	state, err := os.MkdirTemp("", "bpfperf-dmg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	path := filepath.Join(state, daemon.StoreFile)
	os.WriteFile(path, c.data, 0o600)
	socket := filepath.Join(state, "api.sock")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin.daemon, "--state-dir", state, "--socket", socket, "--interval", "200ms", "--profile.every", "0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var exitErr error
wait:
	for {
		select {
		case exitErr = <-done:
			refused = true
			break wait
		case <-time.After(50 * time.Millisecond):
			if _, _, code := run(bin.cli, "--socket", socket, "status"); code == 0 {
				cmd.Process.Signal(syscall.SIGTERM)
				exitErr = <-done
				break wait
			}
		}
	}
	took := time.Since(start)
	text := out.String()
	if took > 10*time.Second {
		t.Errorf("%s: bpfperfd took %v", c.name, took)
	}
	if strings.Contains(text, "goroutine ") || strings.Contains(text, "panic") || strings.Contains(text, "fatal error") {
		t.Errorf("%s: bpfperfd crashed:\n%s", c.name, text)
	}
	if refused {
		code := cmd.ProcessState.ExitCode()
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if code != daemon.ExitStoreDamaged || len(lines) > 3 {
			t.Errorf("%s: bpfperfd exit %d (%v), %d lines, want exit %d and at most 3:\n%s", c.name, code, exitErr, len(lines), daemon.ExitStoreDamaged, text)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, c.data) {
			t.Errorf("%s: bpfperfd refused the store but changed it", c.name)
		}
	} else if exitErr != nil {
		t.Errorf("%s: served, then stopped with %v:\n%s", c.name, exitErr, text)
	}

	start = time.Now()
	stdout, stderr, code := run(bin.cli, "store", "check", "--file", path)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("%s: store check took %v", c.name, took)
	}
	all := strings.TrimSpace(stdout + stderr)
	if n := len(strings.Split(all, "\n")); n > 3 || strings.Contains(all, "goroutine ") || strings.Contains(all, "panic") {
		t.Errorf("%s: store check printed %d lines:\n%s", c.name, n, all)
	}
	switch {
	case !refused && code != 0:
		t.Errorf("%s: bpfperfd served it, store check after: exit %d\n%s", c.name, code, all)
	case refused && code != 1 && code != 2:
		t.Errorf("%s: bpfperfd refused it, store check: exit %d, want 1 or 2\n%s", c.name, code, all)
	}
	return refused
}
