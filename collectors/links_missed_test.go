package collectors

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/transientfd"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestKprobeMissedInVM boots Debian's 6.12 (kprobes, fprobe, and the links'
// missed counts, none of which this host's kernel has) and runs
// TestKprobeMissed there.
func TestKprobeMissedInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{Series: vmtest.Kernel612}, []string{"TestKprobeMissed", "TestTracingLinkBesideScans"})
}

// blockedReads is how many threads block in pipe_read at once: more than
// the return-probe instances either link keeps on 2 CPUs (a kretprobe
// max(10, 2 × CPUs), a kprobe_multi return probe 2 × CPUs per function),
// so both miss some.
const blockedReads = 16

// TestKprobeMissed attaches a kretprobe and a kretprobe_multi link to
// pipe_read and blocks blockedReads threads in it at once. Each return
// probe hit either takes a free instance, and runs the program when the
// read returns, or is missed: so for each link runs + missed = reads
// (give or take another process's pipe read), and missed > 0. Links reports the same missed count as the
// kernel's link info read through cilium/ebpf.
func TestKprobeMissed(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("runs in the 6.12 VM (TestKprobeMissedInVM): kprobes and missed counts (Linux 6.7+)")
	}
	privtest.Root(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enable stats: %v", err)
	}
	defer stats.Close()

	kret := loadKprobe(t, ebpf.AttachNone)
	l1, err := link.Kretprobe(privtest.PipeRead, kret, nil)
	if err != nil {
		t.Fatalf("kretprobe pipe_read: %v", err)
	}
	defer l1.Close()
	multi := loadKprobe(t, ebpf.AttachTraceKprobeMulti)
	l2, err := link.KretprobeMulti(multi, link.KprobeMultiOptions{Symbols: []string{privtest.PipeRead}})
	if err != nil {
		t.Fatalf("kretprobe_multi pipe_read: %v", err)
	}
	defer l2.Close()

	privtest.BlockInPipeRead(t, blockedReads)

	byProg, err := Links()
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	for _, c := range []struct {
		prog *ebpf.Program
		l    link.Link
		typ  string
	}{{kret, l1, "perf_event"}, {multi, l2, "kprobe_multi"}} {
		id := progID(t, c.prog)
		got := byProg[id]
		if len(got) != 1 || got[0].Type != c.typ || got[0].Missed == nil {
			t.Errorf("%s program %d: attach points %+v, want one %s link with a missed count", c.typ, id, got, c.typ)
			continue
		}
		missed := *got[0].Missed
		runs, err := runCount(c.prog)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d runs, %d missed, of %d reads", c.typ, runs, missed, blockedReads)
		// The probes are on every pipe_read of the guest: another
		// process's read in the window adds a hit (CI once saw 17).
		if runs+missed < blockedReads || runs+missed > blockedReads+2 || missed == 0 {
			t.Errorf("%s: %d runs + %d missed, want the %d reads (and at most 2 from other processes) in all, with some missed", c.typ, runs, missed, blockedReads)
		}
		if want := kernelMissed(t, c.l); want != missed {
			t.Errorf("%s: Links says %d missed, the kernel's link info (cilium/ebpf) %d", c.typ, missed, want)
		}
	}
}

func loadKprobe(tb testing.TB, attach ebpf.AttachType) *ebpf.Program {
	tb.Helper()
	prog, err := privtest.LoadKprobe(uniqueName("kp"), attach)
	if err != nil {
		tb.Fatalf("load kprobe program: %v", err)
	}
	tb.Cleanup(func() { prog.Close() })
	return prog
}

// kernelMissed reads a kprobe link's missed count through cilium/ebpf, a
// second reader of the same link info.
func kernelMissed(tb testing.TB, l link.Link) uint64 {
	tb.Helper()
	info, err := l.Info()
	if err != nil {
		tb.Fatal(err)
	}
	if m := info.KprobeMulti(); m != nil {
		return m.Missed
	}
	if pe := info.PerfEvent(); pe != nil {
		if k := pe.Kprobe(); k != nil {
			return k.Missed
		}
	}
	tb.Fatal(errors.New("not a kprobe link"))
	return 0
}

// TestTracingLinkBesideScans: Links names a tracing link (an fentry
// program's) while holder scans keep coming (internal/transientfd): it
// once took a second brief hold inside the link's own to read the
// program's attach object, and a scan waiting between the two left both
// waiting for ever (the daemon's sweep hung in CI on 2026-11-28, once its
// own fentry program made a tracing link on every such kernel).
func TestTracingLinkBesideScans(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("runs in the 6.12 VM (TestKprobeMissedInVM): fentry")
	}
	privtest.Root(t)
	privtest.GetppidFentry(t, "links_fentry")
	stop := make(chan struct{})
	scans := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				scans <- n
				return
			default:
				transientfd.Scan(func() { n++ })
			}
		}
	}()
	done := make(chan error)
	go func() {
		for range 200 {
			if _, err := Links(); err != nil {
				done <- err
				return
			}
			pruneTracingTargets(nil) // name it again each time
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("200 reads of the links beside holder scans did not end in 20 s: a brief hold inside another")
	}
	close(stop)
	t.Logf("200 reads of the links beside %d scans", <-scans)
}
