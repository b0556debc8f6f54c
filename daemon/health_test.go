package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestHealthCatchesHungSampler stops the daemon's sampler for real: its
// store's file system is frozen (FIFREEZE, what fsfreeze and disk
// snapshot tools do), so the next tick's store write blocks in the
// kernel. bpfperf status still answers (the API does not wait on the
// tick): the old probe would pass. bpfperf health must fail within the
// bound (10 intervals, at least 10 s) and not before it, and pass again
// once the file system is thawed and the tick goes on.
func TestHealthCatchesHungSampler(t *testing.T) {
	privtest.Root(t)
	fz := privtest.FreezableDir(t)
	d := startDaemon(t, fz.Path)
	const interval = 200 * time.Millisecond
	bound := api.StaleAfter(interval)

	// A program that runs all the time, so that every tick has a sample
	// to write.
	prog, err := privtest.LoadSocketFilter(uniqueName("health"))
	privtest.Keep(t, prog, err)
	privtest.KeepRunning(t, prog, 20*time.Millisecond, 1)

	health := func() (int, string) {
		out, errOut, code := run(bin.cli, "--socket", d.socket, "health")
		return code, strings.TrimSpace(out + errOut)
	}
	if code, out := health(); code != 0 || !strings.HasPrefix(out, "ok: last tick ") {
		t.Fatalf("health of a running daemon: exit %d %q", code, out)
	}

	fz.Freeze(t)
	frozenAt := time.Now()
	var failedAt time.Time
	var line string
	for failedAt.IsZero() {
		code, out := health()
		switch {
		case code != 0:
			failedAt, line = time.Now(), out
		case time.Since(frozenAt) > bound+3*time.Second:
			t.Fatalf("health passes %v after the store's file system froze (bound %v): %q", time.Since(frozenAt).Round(time.Millisecond), bound, out)
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	took := failedAt.Sub(frozenAt)
	t.Logf("health failed %v after the freeze (bound %v): %s", took.Round(time.Millisecond), bound, line)
	t.Logf("bpfperfd's threads wait in: %s", wchans(d.cmd.Process.Pid))
	if !strings.HasPrefix(line, "bpfperf: sampler stalled") {
		// The API itself did not answer. CI caught this once, 2026-11-27:
		// status read the store, and a read waits for bbolt's meta lock,
		// which the tick's write held, stuck writing the meta page; status
		// now takes the store's counts with a bound (store.Counts). Where
		// the goroutines wait tells which lock it is should it come back.
		d.cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
		fz.Thaw()
		t.Fatalf("health's line %q: want one line, sampler stalled; the daemon's goroutines:\n%s", line, d.stderr)
	}
	if took < bound-2*interval {
		t.Errorf("health failed %v after the freeze, before the bound %v", took, bound)
	}
	if !strings.HasPrefix(line, "bpfperf: sampler stalled: last tick ") || strings.Count(line, "\n") > 0 {
		t.Errorf("health's line %q: want one line, sampler stalled", line)
	}

	// The bug health catches: status answers, its last sample as old.
	var st api.Status
	start := time.Now()
	d.json(t, &st, "status")
	t.Logf("status answered in %v with the sampler stalled", time.Since(start).Round(time.Millisecond))
	if age := time.Since(st.LastSample); st.LastSample.After(frozenAt) || age < bound {
		t.Errorf("status' last sample %v (%v ago), frozen at %v: want the sampler stopped since", st.LastSample, age, frozenAt)
	}

	if err := fz.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawedAt := time.Now()
	eventually(t, "health to pass once the store's file system is thawed", func() bool {
		code, out := health()
		line = out
		return code == 0
	})
	t.Logf("health passed %v after the thaw: %s", time.Since(thawedAt).Round(time.Millisecond), line)
	d.json(t, &st, "status")
	if !st.LastSample.After(thawedAt) {
		t.Errorf("status' last sample %v, thawed at %v: want a tick since", st.LastSample, thawedAt)
	}
}

// wchans counts where a process's threads sleep in the kernel
// (/proc/PID/task/*/wchan), for the log.
func wchans(pid int) string {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	n := map[string]int{}
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		n[string(b)]++
	}
	return fmt.Sprint(n)
}
