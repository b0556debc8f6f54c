package daemon_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestChurn: programs loaded, run and unloaded in batches of 100 while the
// daemon samples every 100 ms and profiles. Every program unloads when its
// owner lets go; the daemon lists each instance once, with exactly the runs
// it had (no series mixed between instances); its descriptors return to
// where they were and its anonymous RSS stays bounded. 2,000 programs here;
// BPFPERF_CHURN_PROGRAMS=10000 (make soak) runs the long version.
func TestChurn(t *testing.T) {
	privtest.Root(t)
	total := 2000
	if v := os.Getenv("BPFPERF_CHURN_PROGRAMS"); v != "" {
		total, _ = strconv.Atoi(v)
	}
	d := startDaemon(t, t.TempDir(), "--interval", "100ms", "--profile.every", "1s")
	pid := d.cmd.Process.Pid
	// The baseline once the daemon has warmed up: its first profile
	// window built (kallsyms read) and a listing answered.
	time.Sleep(3 * time.Second)
	d.cli(t, "progs", "--all")
	fds0, heap0 := fewestFds(t, pid), heapLive(t, d)

	prefix := uniqueName("churn")[:8]
	runs := map[uint32]uint64{}
	const batch = 100
	for start := 0; start < total; start += batch {
		var progs []*ebpf.Program
		var ids []uint32
		for i := start; i < min(start+batch, total); i++ {
			p, err := privtest.LoadSocketFilter(fmt.Sprintf("%s%d", prefix, i))
			if err != nil {
				t.Fatal(err)
			}
			if err := privtest.Run(p, i%7+1); err != nil {
				t.Fatal(err)
			}
			info, _ := p.Info()
			id, _ := info.ID()
			progs, ids = append(progs, p), append(ids, uint32(id))
			runs[uint32(id)] = uint64(i%7 + 1)
		}
		time.Sleep(300 * time.Millisecond) // a few ticks see them
		for _, p := range progs {
			p.Close()
		}
		// The owner let go: the kernel frees each although the daemon
		// sweeps meanwhile.
		eventually(t, "the kernel to free a batch", func() bool {
			for _, id := range ids {
				if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
					p.Close()
					return false
				} else if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("program %d: %v", id, err)
				}
			}
			return true
		})
	}
	time.Sleep(500 * time.Millisecond)

	var all []api.ProgRow
	d.json(t, &all, "progs", "--all", "-o", "json")
	seen := map[uint32]int{}
	for _, r := range all {
		if !strings.HasPrefix(r.Name, prefix) {
			continue
		}
		seen[r.ID]++
		if want, ok := runs[r.ID]; !ok || r.RunCnt != want || r.Loaded {
			t.Errorf("program %d (%s): %d runs, loaded %v; want %d runs, unloaded", r.ID, r.Name, r.RunCnt, r.Loaded, want)
		}
	}
	for id := range runs {
		if seen[id] != 1 {
			t.Errorf("program %d listed %d times, want once", id, seen[id])
		}
	}
	// The daemon hands a burst's freed heap back every 10 s
	// (returnIdleMemory): measure after it has.
	time.Sleep(11 * time.Second)
	fds1, heap1, rss1 := fewestFds(t, pid), heapLive(t, d), anonRSS(t, pid)
	t.Logf("%d programs churned: fds %d -> %d, live heap %.1f -> %.1f MiB, anonymous RSS after %.1f MiB (all RSS, the store's mapped pages included: %.1f MiB)",
		total, fds0, fds1, float64(heap0)/(1<<20), float64(heap1)/(1<<20), float64(rss1)/(1<<20), float64(rssBytes(t, pid))/(1<<20))
	if fds1 > fds0 {
		t.Errorf("the daemon's descriptors grew from %d to %d", fds0, fds1)
	}
	// The live heap is noisy by a few MiB (what the last collection
	// caught in flight), so a leak is bounded absolutely. What that
	// proves depends on the count: make soak's 10,000 programs fail it
	// leaking a kilobyte each; make test's 2,000 (10 MiB live after, on
	// 2026-11-24) only leaking 5 KB each. Neither bound is timed: the
	// figures are read after the daemon has handed freed heap back, and
	// load on the host changes when, not how much. What a heap profile
	// after 10,000 showed live (docs/churn.md): the kernel's
	// symbols for profiles 7.6 MB, the names seen 1 MB, json's encoder
	// pool 4 MB.
	if heap1 > 20<<20 {
		t.Errorf("live heap %.1f MiB after %d programs, over 20 MiB", float64(heap1)/(1<<20), total)
	}
	// The goal in production: 50 MiB resident, the store's pages aside.
	if rss1 > 50<<20 {
		t.Errorf("anonymous RSS %.1f MiB after %d programs, over 50 MiB", float64(rss1)/(1<<20), total)
	}
}

// heapLive is the daemon's live heap as its status reports it.
func heapLive(t *testing.T, d *daemonProc) int64 {
	var st api.Status
	d.json(t, &st, "status")
	return st.HeapLiveBytes
}

// anonRSS is pid's resident memory less the file pages it maps (the
// store's bbolt file grows with every program it records).
func anonRSS(t *testing.T, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}

// fewestFds is the fewest open descriptors of pid over five looks: the
// sweep opens and closes some within a tick.
func fewestFds(t *testing.T, pid int) int {
	fewest := -1
	for range 5 {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		if fewest < 0 || len(ents) < fewest {
			fewest = len(ents)
		}
		time.Sleep(70 * time.Millisecond)
	}
	return fewest
}
