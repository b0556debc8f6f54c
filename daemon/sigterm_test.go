package daemon_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// TestSIGTERMDuringStartup sends SIGTERM at random moments of bpfperfd's
// start-up on a store whose proof takes a while (the proof child, the
// stats cost calibration, the sweep's proof, the profiler's first
// window): it ends within 2 s every time, quietly (exit 0, no error line),
// and leaves run-time stats off and the store sound.
func TestSIGTERMDuringStartup(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	state := t.TempDir()
	path := filepath.Join(state, daemon.StoreFile)
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	if _, err := storegen.Generate(db, storegen.Config{Mix: storegen.Mix{Steady: 200}, Start: start, Duration: 6 * time.Hour, Batch: 3600, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	fi, _ := os.Stat(path)
	// How long a start takes to the first answer, for where to aim.
	begun := time.Now()
	d := startDaemon(t, state)
	ready := time.Since(begun)
	d.stop(t, syscall.SIGTERM)
	t.Logf("store of %.0f MiB; bpfperfd answers %v after exec", float64(fi.Size())/(1<<20), ready.Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 10 {
		var out bytes.Buffer
		cmd := exec.Command(bin.daemon, "--state-dir", state, "--socket", filepath.Join(state, "api.sock"), "--interval", "200ms")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(ready))))
		cmd.Process.Signal(syscall.SIGTERM)
		sent := time.Now()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("round %d: bpfperfd took %v to end after SIGTERM", round, took)
			}
			// Killed by the signal itself is fine too: it came before the
			// handler was installed, and nothing had started.
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
				err = nil
			}
			if err != nil || strings.Contains(out.String(), "level=ERROR") || strings.Contains(out.String(), "bpfperfd: ") {
				t.Errorf("round %d: SIGTERM during start-up: %v\n%s", round, err, out.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("round %d: bpfperfd did not end 10 s after SIGTERM\n%s", round, out.String())
		}
		if on, err := privtest.StatsCounting(); err != nil || on {
			t.Errorf("round %d: stats still counting after bpfperfd ended (%v)", round, err)
		}
	}
	if err := store.CheckFile(t.Context(), path, true); err != nil {
		t.Errorf("after 10 interrupted starts: %v", err)
	}
}
