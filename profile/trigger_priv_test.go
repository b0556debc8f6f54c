package profile

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestTriggersByCgroup: one tracepoint program, driven by two processes
// in two cgroups of the test's own, 3 getppid calls in one for 1 in the
// other: the profile splits the program's samples between the two
// cgroups, by path, as the kernel split their CPU time (cpu.stat, within
// 20%), and charges almost none to anything else. It runs
// here (cgroup2 beside v1 controllers, Linux 6.18) and in the test VM
// (cgroup2 alone, Debian's 6.1, its root's subtree control never written:
// TestSampleCgroupNeedsSubtreeControl), where every sample names the root
// cgroup, so the cgroups come from /proc as the rings drain
// (decoder.procCgroup); there it checks the names and the order of the
// split, not its ratio (see below).
func TestTriggersByCgroup(t *testing.T) { triggersByCgroup(t) }

// TestTriggersPerfEventV1 (in the VM): TestTriggersByCgroup with the
// perf_event controller bound to a cgroup v1 hierarchy, as on hybrid hosts
// where systemd mounts it there (and Docker makes /docker/<id> in it),
// and with the test process, hence both drivers, in a v1 cgroup of its
// own: every sample carries that v1 cgroup's id, which names nothing, or
// another cgroup, under the cgroup2 mount. The split must still be by
// the drivers' cgroup2 paths.
func TestTriggersPerfEventV1(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("binds perf_event to a cgroup v1 hierarchy, which would change the host's: runs in the test VM (TestProfileInVM)")
	}
	privtest.Root(t)
	v1 := t.TempDir()
	if err := unix.Mount("perf_event", v1, "cgroup", 0, "perf_event"); err != nil {
		t.Fatalf("mount a cgroup v1 perf_event hierarchy: %v", err)
	}
	own := filepath.Join(v1, "docker", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(v1, "cgroup.procs"), pid, 0)
		os.Remove(own)
		os.Remove(filepath.Dir(own))
		if err := unix.Unmount(v1, 0); err != nil {
			t.Errorf("unmount the v1 hierarchy: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(own, "cgroup.procs"), pid, 0); err != nil {
		t.Fatal(err)
	}
	if !cgroupid.PerfEventOnV1("/proc/self/cgroup") {
		b, _ := os.ReadFile("/proc/self/cgroup")
		t.Fatalf("perf_event not seen on a v1 hierarchy:\n%s", b)
	}
	triggersByCgroup(t)
}

func triggersByCgroup(t *testing.T) {
	iterations, calls, minPod := int32(20000), 100_000, int64(50)
	if vmtest.InVM() {
		calls, minPod = 20_000, 20
	}
	privtest.Root(t)
	svc := privtest.MakeCgroup(t, "system.slice/bpfperf-trigger.service")
	pod := privtest.MakeCgroup(t, "kubepods-besteffort-pod0a1b2c3d_0000_4000_8000_00000000abcd.slice/cri-containerd-"+
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope")
	prog := privtest.GetppidTracepoint(t, "trigger_spin", iterations)
	id, _ := progID(t, prog)
	sym := NewSymbolizer(SymbolizerConfig{})
	if err := sym.Learn(id); err != nil {
		t.Fatal(err)
	}
	s := newSampler(t, SamplerConfig{Hz: 999})
	if !s.cgroups {
		t.Fatal("the kernel took no PERF_SAMPLE_CGROUP")
	}
	type capture struct {
		c   *Capture
		err error
	}
	// The capture runs from every CPU sampling until the drivers are
	// done, however long they take (3.4 to 5.8 s of 20,000 calls in the
	// VM, by the host's load).
	done := make(chan capture)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	on := make(chan struct{})
	go func() {
		c, err := s.capture(ctx, time.Minute, func() { close(on) })
		done <- capture{c, err}
	}()
	<-on
	start := time.Now()
	cpuSvc, cpuPod := privtest.GetppidThreeToOne(t, svc, pod, calls)
	t.Logf("the drivers took %s; the kernel charged %s of CPU to %s, %s to %s", time.Since(start), cpuSvc, svc.Path, cpuPod, pod.Path)
	stop()
	r := <-done
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		t.Fatal(r.err)
	}
	p, err := Build(r.c, sym, BuildOptions{Cgroups: cgroupid.NewAt(cgroupRoot(t), nil)})
	if err != nil {
		t.Fatal(err)
	}
	triggers, err := ProgramTriggers(p)
	if err != nil {
		t.Fatal(err)
	}
	by := map[Trigger]int64{}
	var all int64
	for _, c := range triggers[id] {
		by[c.Trigger] = c.Samples
		all += c.Samples
	}
	nSvc, nPod := by[Trigger{ContextTask, svc.Path}], by[Trigger{ContextTask, pod.Path}]
	t.Logf("program %d: %d samples: %d in %s, %d in %s; all: %+v", id, all, nSvc, svc.Path, nPod, pod.Path, triggers[id])
	if nPod < minPod {
		t.Fatalf("%d samples in the pod's cgroup: too few to tell a ratio", nPod)
	}
	switch ratio, want := float64(nSvc)/float64(nPod), float64(cpuSvc)/float64(cpuPod); {
	case vmtest.InVM() && ratio <= 1:
		// Emulated, guest CPU time per instruction follows the host's
		// load, so time splits far less exactly than events there (2.48
		// and 5.3 to 1 in two runs): the VM shows the cgroups named, on
		// cgroup2 alone, through /proc, with the 3x busier one ahead.
		t.Errorf("split %d:%d = %.2f, want the busier cgroup ahead", nSvc, nPod, ratio)
	case !vmtest.InVM() && math.Abs(ratio/want-1) > 0.2:
		t.Errorf("split %d:%d = %.2f, want the cgroups' CPU time's %.2f within 20%%", nSvc, nPod, ratio, want)
	}
	// Other tasks on the host call getppid too (a shell reading $PPID:
	// on a host busy with other work 4,349 of 7,383 samples were theirs),
	// and are charged to their own cgroups, rightly. What cannot be right
	// is a sample charged to the test's own cgroup tree other than the
	// two leaves, or to no cgroup: a driver's sample charged wrong (task
	// or unknown context: the cgroup is what is checked here).
	top := path.Dir(path.Dir(svc.Path)) // "/bpfperf-test-PID"
	var wrong int64
	for tr, n := range by {
		mine := tr.Cgroup == top || strings.HasPrefix(tr.Cgroup, top+"/")
		if tr.Cgroup == "" || strings.HasPrefix(tr.Cgroup, "id ") || (mine && tr.Cgroup != svc.Path && tr.Cgroup != pod.Path) {
			wrong += n
		}
	}
	if wrong*20 > nSvc+nPod {
		t.Errorf("%d samples charged to no cgroup or to the test's own cgroups but the two drivers', against %d to the drivers", wrong, nSvc+nPod)
	}
}

func cgroupRoot(t *testing.T) string {
	t.Helper()
	root, err := cgroupid.Mount("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestSampleCgroupInVM boots the test VM on its own for
// TestSampleCgroupNeedsSubtreeControl, which writes the root's subtree
// control (the VM's other profile tests need it unwritten).
func TestSampleCgroupInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{}, []string{"TestSampleCgroupNeedsSubtreeControl"})
}

// TestSampleCgroupNeedsSubtreeControl (in the VM): what docs/triggers.md
// says of the kernel. A perf sample's cgroup is the task's cgroup for the
// perf_event controller, which cgroup v2 enables implicitly only below a
// root whose cgroup.subtree_control was written: before that, a busy task
// in a cgroup of its own is sampled as the root's (id 1); after, as its
// own. The samples are read raw, without the /proc fallback.
func TestSampleCgroupNeedsSubtreeControl(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("writes the root cgroup's subtree control: runs in the VM (TestSampleCgroupInVM)")
	}
	privtest.Root(t)
	rawIDs := func(c *privtest.Cgroup) map[uint64]int {
		t.Helper()
		busy := c.Start(t, exec.Command("sh", "-c", "while :; do :; done"))
		defer busy.Process.Kill()
		s := newSampler(t, SamplerConfig{Hz: 99})
		s.cgroupRoot = "" // no /proc fallback
		capture, err := s.Capture(context.Background(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		by := map[uint64]int{}
		for _, smp := range capture.Samples {
			if int(smp.PID) == busy.Process.Pid {
				by[smp.Cgroup]++
			}
		}
		return by
	}
	before := privtest.MakeCgroup(t, "system.slice/before.service")
	got := rawIDs(before)
	t.Logf("subtree control never written: the task in %s (id %d) sampled as %v", before.Path, before.ID, got)
	if len(got) != 1 || got[rootCgroupID] < 50 {
		t.Errorf("before: samples by cgroup id %v, want all of 99 or so on the root (%d)", got, rootCgroupID)
	}
	if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+pids"), 0); err != nil {
		t.Fatal(err)
	}
	after := privtest.MakeCgroup(t, "system.slice/after.service")
	got = rawIDs(after)
	t.Logf("after +pids at the root: the task in %s (id %d) sampled as %v", after.Path, after.ID, got)
	if len(got) != 1 || got[after.ID] < 50 {
		t.Errorf("after: samples by cgroup id %v, want all of 99 or so on %d", got, after.ID)
	}
}
