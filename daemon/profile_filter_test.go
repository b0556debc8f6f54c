package daemon_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestProfileFilter: at the defaults the kernel filter is on and keeps
// nearly every sample of a host without busy BPF programs from the
// daemon (status and /metrics count them), while a busy program's window
// still carries its samples; --profile.filter=false turns it off, and
// its captures wake on their drain timer, which status counts.
func TestProfileFilter(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "1s")
	var st api.Status
	eventuallyWithin(t, 20*time.Second, "three filtered windows", func() bool {
		st = api.Status{}
		if d.query(&st, "status") != nil || st.Profiling == nil || st.Profiling.Filter == nil {
			return false
		}
		return st.Profiling.Windows >= 3 || !st.Profiling.Filter.On
	})
	f := st.Profiling.Filter
	switch {
	case !f.On && strings.Contains(f.Reason, "not supported"):
		privtest.Skip(t, "kernel filter: "+f.Reason)
	case !f.On && strings.Contains(f.Reason, "kernel drops filtered samples"):
		t.Skipf("another engineer's tracing program is busy on this host: %s", f.Reason)
	case !f.On:
		t.Fatalf("filter off: %s", f.Reason)
	}
	// Idle, but for other engineers' work on this host: not over 5%.
	if f.Dropped == 0 || f.Passed*20 > f.Passed+f.Dropped {
		t.Errorf("filter passed %d, dropped %d", f.Passed, f.Dropped)
	}
	if !strings.Contains(d.cli(t, "status"), "profile filter") {
		t.Error("status does not show the filter")
	}
	t.Logf("%d windows: %d samples passed, %d dropped, %d pages; last window %d samples", st.Profiling.Windows, f.Passed, f.Dropped, f.Pages, st.Profiling.LastProfileSamples)

	// A busy program's samples still reach its windows.
	prog, id, _ := loadHot(t, uniqueName("filter_hot"))
	spin(t, prog)
	waitSampledCPU(t, d, id, 10)

	u := startDaemon(t, t.TempDir(), "--profile.every", "1s", "--profile.filter=false")
	eventuallyWithin(t, 20*time.Second, "two unfiltered windows", func() bool {
		st = api.Status{}
		return u.query(&st, "status") == nil && st.Profiling != nil && st.Profiling.Filter != nil && st.Profiling.Windows >= 2
	})
	if f := st.Profiling.Filter; f.On || f.Reason != "off" {
		t.Errorf("--profile.filter=false: filter %+v, want off", f)
	}
	// Unfiltered, a ring fills at the sampling rate and the capture
	// drains it on a timer: at 99 Hz into 32 pages, every 320 ms of a 1 s
	// window. The count lags a window behind (it is added when a window
	// ends), so at least one a finished window, not three.
	if dr := st.Profiling.Drains; dr == nil || dr.Timed < uint64(st.Profiling.Windows) {
		t.Errorf("--profile.filter=false: %d windows, drains %+v; want the drain timer's wake-ups counted, at least one a window", st.Profiling.Windows, dr)
	} else {
		t.Logf("unfiltered: %d windows, drains %+v", st.Profiling.Windows, *dr)
	}
	if !strings.Contains(u.cli(t, "status"), "on the drain timer") {
		t.Error("status does not show the profiler's wake-ups")
	}
}

// TestStatusFromFirstAnswer: the first answer of status, read as soon as
// the socket answers, has profiling and counters. With the kernel filter
// the profiler takes longer to start (the filter loads), and status read
// in that time once had neither: the rooms start before the API answers
// (issue 46).
func TestStatusFromFirstAnswer(t *testing.T) {
	privtest.Root(t)
	privtest.LockStats(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "api.sock")
	cmd := exec.Command(bin.daemon, "--state-dir", dir, "--socket", socket, "--interval", "200ms", "--profile.filter")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	start := time.Now()
	first := func() api.Status {
		for deadline := start.Add(startWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			c, err := api.Dial(socket, time.Second)
			if err != nil {
				continue
			}
			if st, err := c.Status(); err == nil {
				return st
			}
		}
		t.Fatalf("no answer within %v:\n%s", startWait, &stderr)
		return api.Status{}
	}()
	answered := time.Since(start)
	if first.Profiling != nil && first.Counters != nil {
		t.Logf("first answer after %v: profiling (%s) and counters", answered.Round(time.Millisecond), first.Profiling.Event)
		return
	}
	// Absent at first: absent for good (the host refuses them), or late.
	c, err := api.Dial(socket, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := c.Status(); err == nil && ((st.Profiling != nil) != (first.Profiling != nil) || (st.Counters != nil) != (first.Counters != nil)) {
			t.Fatalf("first answer after %v had profiling %v, counters %v; %v after start they are %v, %v",
				answered.Round(time.Millisecond), first.Profiling != nil, first.Counters != nil, time.Since(start).Round(time.Millisecond), st.Profiling != nil, st.Counters != nil)
		}
	}
	privtest.Skip(t, fmt.Sprintf("profiling (%v) or counters (%v) never start on this host:\n%s", first.Profiling != nil, first.Counters != nil, &stderr))
}
