package vmtest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The archive must unpack with a real cpio reader the same way the kernel
// reads it; busybox cpio is one (installed with busybox-static).
func TestWriteCPIO(t *testing.T) {
	var buf bytes.Buffer
	files := []File{
		{Name: "dir", Mode: fs.ModeDir | 0o755},
		{Name: "dir/a", Mode: 0o644, Data: []byte("hello")},
		{Name: "/b", Mode: 0o755, Data: []byte("odd-sized!")},
		{Name: "dir/empty", Mode: 0o600},
	}
	if err := WriteCPIO(&buf, files); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive is %d bytes, want a multiple of 4", buf.Len())
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("070701")) || !bytes.Contains(buf.Bytes(), []byte("TRAILER!!!\x00")) {
		t.Fatal("not a newc archive with a trailer")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox to unpack with")
	}
	dir := t.TempDir()
	cmd := exec.Command(busybox, "cpio", "-i", "-d")
	cmd.Dir, cmd.Stdin = dir, &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -i: %v\n%s", err, out)
	}
	for _, f := range files {
		path := filepath.Join(dir, strings.TrimPrefix(f.Name, "/"))
		st, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if st.Mode().Perm() != f.Mode.Perm() || st.IsDir() != f.Mode.IsDir() {
			t.Errorf("%s: mode %v, want %v", f.Name, st.Mode(), f.Mode)
		}
		if !st.IsDir() {
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, f.Data) {
				t.Errorf("%s: %q, want %q", f.Name, got, f.Data)
			}
		}
	}
}

func TestWriteCPIORejectsUnnamed(t *testing.T) {
	if err := WriteCPIO(&bytes.Buffer{}, []File{{Mode: 0o644}}); err == nil {
		t.Error("want an error for a file without a name")
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"a":          "'a'",
		"^Test$":     "'^Test$'",
		"it's":       `'it'\''s'`,
		"":           "''",
		"a b; rm -r": "'a b; rm -r'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCheckBinary(t *testing.T) {
	if err := checkBinary("/bin/sh", AMD64); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("/bin/sh: %v, want a dynamically-linked error", err)
	}
	if err := checkBinary("/bin/busybox", AMD64); err != nil {
		t.Skipf("no static busybox here: %v", err)
	}
	if err := checkBinary("/bin/busybox", ARM64); err == nil || !strings.Contains(err.Error(), "EM_X86_64, not the arm64 guest") {
		t.Errorf("an x86 busybox for arm64: %v, want it refused", err)
	}
	bb, _ := os.ReadFile("/bin/busybox")
	cfg := Config{Arch: ARM64, Busybox: "/bin/busybox", Files: []File{{Name: "bin/tool", Data: bb}}}
	if err := buildInitramfs(filepath.Join(t.TempDir(), "i"), cfg, "/bin/busybox", nil); err == nil {
		t.Error("an x86 test binary and tool in an arm64 initramfs: want them refused")
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Arch: ARM64, Exact: true}, ""},
		{Config{Arch: "riscv64"}, `vm arch "riscv64": want amd64 or arm64`},
		{Config{Exact: true}, "vm exact mode needs arch arm64"},
		{Config{Arch: ARM64, Exact: true, CPUs: 2}, "vm exact mode runs 1 vCPU, not 2"},
	} {
		c.cfg.defaults()
		err := c.cfg.check()
		if (err == nil) != (c.want == "") || (err != nil && !strings.HasPrefix(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestQEMUArgs: the modes' command lines, as the facts they rest on want
// them: exact is one vCPU under icount (which refuses multi-threaded
// TCG), ordinary arm64 is multi-threaded without it.
func TestQEMUArgs(t *testing.T) {
	line := func(cfg Config) string {
		cfg.defaults()
		name, args := qemuArgs(cfg, "k", "i")
		return name + " " + strings.Join(args, " ")
	}
	for _, c := range []struct {
		cfg       Config
		has, hasn []string
	}{
		{Config{}, []string{"qemu-system-x86_64 ", "-smp 2", "console=ttyS0", "tsc=reliable"}, []string{"-icount"}},
		{Config{Arch: ARM64}, []string{"qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -accel tcg,thread=multi", "-smp 2", "console=ttyAMA0"}, []string{"-icount", "tsc="}},
		{Config{Arch: ARM64, Exact: true}, []string{"-accel tcg ", "-smp 1", "-icount shift=1,sleep=off"}, []string{"thread=multi"}},
	} {
		l := line(c.cfg)
		for _, s := range c.has {
			if !strings.Contains(l, s) {
				t.Errorf("%+v: %q lacks %q", c.cfg, l, s)
			}
		}
		for _, s := range c.hasn {
			if strings.Contains(l, s) {
				t.Errorf("%+v: %q has %q", c.cfg, l, s)
			}
		}
	}
}

// TestInVMSelf boots the VM with this package's own tests and runs
// TestVMEnvironment there: the harness end to end, on each kernel series
// and architecture, arm64 in both its modes.
func TestInVMSelf(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"6.1", Config{Series: Kernel61}},
		{"6.12", Config{Series: Kernel612}},
		{"arm64-6.1", Config{Arch: ARM64, Series: Kernel61}},
		{"arm64-6.12-exact", Config{Arch: ARM64, Series: Kernel612, Exact: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := RunTests(t, c.cfg, []string{"TestVMEnvironment"})
			if want := "kernel " + c.cfg.Series.Name + "."; !strings.Contains(res.Output, want) {
				t.Errorf("the VM did not boot a %s kernel (no %q in its output)", c.cfg.Series.Name, want)
			}
			if want := "arch " + string(c.cfg.arch()) + ","; !strings.Contains(res.Output, want) {
				t.Errorf("the VM did not run an %s guest (no %q in its output)", c.cfg.arch(), want)
			}
		})
	}
}

// TestBootHungIsRetried: a boot that has not started the test binary by
// BootTimeout is killed and tried again, bootTries times in all, and the
// error says so. A 200ms limit is passed by every boot.
func TestBootHungIsRetried(t *testing.T) {
	skipUnlessHost(t)
	bin := filepath.Join(t.TempDir(), "pkg.test")
	if err := BuildTestBinary(".", bin, AMD64); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := Run(context.Background(), Config{BootTimeout: 200 * time.Millisecond}, bin, "-test.run", "^TestVMEnvironment$")
	if !errors.Is(err, errBootHung) || !strings.Contains(err.Error(), "had not started after 200ms") {
		t.Fatalf("err %v, want a hung boot", err)
	}
	if res == nil || len(res.FailedBoots) != bootTries-1 || !strings.Contains(res.FailedBoots[0], "had not started after 200ms") {
		t.Fatalf("result %+v, want %d hung boots before the last", res, bootTries-1)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("three killed boots took %s", took)
	}
}

// TestBootDiedIsRetried: a guest kernel that dies before the test binary
// starts is booted again, bootTries times in all, each death's console
// kept for the log. An init that does not exist makes every boot die.
// A boot may instead hang before the kernel runs (CI run 33: SeaBIOS
// still drawing after 90 s on a loaded host), which Run retries the same
// way; the test wants the deaths it can see, at least one of them.
func TestBootDiedIsRetried(t *testing.T) {
	skipUnlessHost(t)
	bin := filepath.Join(t.TempDir(), "pkg.test")
	if err := BuildTestBinary(".", bin, AMD64); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{kernelArgs: "rdinit=/no-such-init"}, bin, "-test.run", "^TestVMEnvironment$")
	if err == nil || res == nil || len(res.FailedBoots) != bootTries-1 {
		t.Fatalf("result %+v (err %v), want %d failed boots before a last that fails", res, err, bootTries-1)
	}
	boots := append(slices.Clone(res.FailedBoots), err.Error())
	died := 0
	for i, b := range boots {
		switch {
		case strings.Contains(b, "Kernel panic"):
			died++
		case strings.Contains(b, "had not started after"):
			t.Logf("boot %d hung before the kernel died; Run retried it", i+1)
		default:
			t.Errorf("boot %d: %.300s; want the kernel's panic kept", i+1, b)
		}
	}
	if died == 0 {
		t.Fatalf("no boot died with the kernel's panic kept: %v", err)
	}
	if strings.Contains(err.Error(), "Kernel panic") && !errors.Is(err, errBootDied) {
		t.Errorf("err %v, want errBootDied for a last boot that died", err)
	}
}

// TestLockupIsTriedOnce: a run the guest kernel ends with a soft lockup
// is tried once more, the first run's console is kept for the log, and a
// second lockup is the error. The guest test below fakes the watchdog's
// line and crashes the kernel, as softlockup_panic=1 does.
func TestLockupIsTriedOnce(t *testing.T) {
	res, err := runGuestTest(t, "TestVMFakeLockup")
	if !errors.Is(err, errLockup) || !strings.Contains(err.Error(), "stuck for 26s") {
		t.Fatalf("err %v, want a soft lockup naming the stuck CPU", err)
	}
	if res == nil || len(res.Lockups) != lockupTries-1 || !strings.Contains(res.Lockups[0], "BUG: soft lockup") {
		t.Fatalf("result %+v, want %d lockup(s) kept before the last", res, lockupTries-1)
	}
}

// TestInt3OopsIsTriedOnce: a run that fails after the guest kernel took
// an int3 Oops is tried once more, the first run's console from the Oops
// is kept for the log, and a second such run is the error.
func TestInt3OopsIsTriedOnce(t *testing.T) {
	res, err := runGuestTest(t, "TestVMFakeInt3Oops")
	if !errors.Is(err, errInt3Oops) || !strings.Contains(err.Error(), "kprobe_multi_link_prog_run") {
		t.Fatalf("err %v, want an int3 Oops naming where", err)
	}
	if res == nil || len(res.Oopses) != int3Tries-1 || !strings.Contains(res.Oopses[0], "Oops: int3") {
		t.Fatalf("result %+v, want %d Oops(es) kept before the last", res, int3Tries-1)
	}
}

// runGuestTest runs this package's test name in the VM with Run, on the
// host only.
func runGuestTest(t *testing.T, name string) (*Result, error) {
	t.Helper()
	skipUnlessHost(t)
	bin := filepath.Join(t.TempDir(), "pkg.test")
	if err := BuildTestBinary(".", bin, AMD64); err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), Config{}, bin, "-test.run", "^"+name+"$")
}

// TestVMFakeInt3Oops, inside the VM, prints an int3 Oops as the kernel
// does and fails.
func TestVMFakeInt3Oops(t *testing.T) {
	if !InVM() {
		t.Skip("runs inside the VM (TestInt3OopsIsTriedOnce)")
	}
	for _, line := range []string{"<0>Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n", "<0>RIP: 0010:kprobe_multi_link_prog_run+0x1/0x90\n"} {
		if err := os.WriteFile("/dev/kmsg", []byte(line), 0); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the console prints it
	t.Fatal("failed after an int3 Oops, as a test would")
}

// TestVMFakeLockup, inside the VM, prints the soft-lockup watchdog's line
// and crashes the kernel.
func TestVMFakeLockup(t *testing.T) {
	if !InVM() {
		t.Skip("runs inside the VM (TestLockupIsTriedOnce)")
	}
	if err := os.WriteFile("/dev/kmsg", []byte("<0>watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [fake:1]\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute)
	t.Fatal("the kernel did not crash")
}

// TestVMEnvironment checks, inside the VM, what BPF tests rely on.
func TestVMEnvironment(t *testing.T) {
	if !InVM() {
		t.Skip("runs inside the VM (TestInVMSelf)")
	}
	if os.Getenv("BPFPERF_REQUIRE_PRIVILEGED") != "1" {
		t.Error("BPFPERF_REQUIRE_PRIVILEGED is not 1")
	}
	for _, p := range []string{
		"/sys/kernel/btf/vmlinux",
		"/sys/fs/bpf",
		"/sys/kernel/tracing/trace_pipe",
		"/proc/self/fd",
		"/dev/null",
	} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	if os.Geteuid() != 0 {
		t.Error("not root in the VM")
	}
	cs, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	cur := string(bytes.TrimSpace(cs))
	switch runtime.GOARCH {
	case "amd64":
		// Without tsc=reliable the kernel finds TCG's TSCs unsynchronized and
		// sched_clock stands still for up to a tick at a time on one CPU, which
		// cpu-clock counts inherit.
		if err != nil || (cur != "tsc" && cur != "tsc-early") {
			t.Errorf("clocksource %q, %v; want tsc (or tsc-early, before the kernel switches)", cs, err)
		}
	case "arm64":
		if err != nil || cur != "arch_sys_counter" {
			t.Errorf("clocksource %q, %v; want arch_sys_counter", cs, err)
		}
		// The PMU the arm64 guest is for: the virt machine's device tree
		// describes it and Linux's driver registers it.
		if pmus, _ := filepath.Glob("/sys/bus/event_source/devices/armv8_pmuv3*"); len(pmus) == 0 {
			t.Error("no armv8_pmuv3 event source in the arm64 guest")
		}
	}
	_, exact := ICount()
	if n := runtime.NumCPU(); exact && n != 1 {
		t.Errorf("%d CPUs in an exact VM, want 1", n)
	}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	t.Logf("kernel %s, arch %s, exact %v", bytes.TrimSpace(rel), runtime.GOARCH, exact)
}

func TestBenchMetrics(t *testing.T) {
	out := "=== RUN x\nBenchmarkFoo is slow\nBenchmarkFoo-2   \t       1\t  123 ns/op\t  45.5 base-ns/run\t 7 x-ns/run\nPASS\n"
	m := BenchMetrics(out, "BenchmarkFoo")
	if m["ns/op"] != 123 || m["base-ns/run"] != 45.5 || m["x-ns/run"] != 7 || len(m) != 3 {
		t.Errorf("BenchMetrics = %v", m)
	}
	if BenchMetrics(out, "BenchmarkBar") != nil {
		t.Error("metrics for a benchmark that did not run")
	}
}

// TestNotPassed: a runner's expected test counts as run only on its own
// "--- PASS: Name (" line: not a skip, a failure, a longer name sharing
// its prefix, or one of its subtests.
func TestNotPassed(t *testing.T) {
	out := "=== RUN   TestA\n--- PASS: TestA (0.01s)\r\n--- SKIP: TestB (0.00s)\n--- FAIL: TestC (0.00s)\n" +
		"--- PASS: TestDLonger (0.00s)\n--- PASS: TestE (0.00s)\n    --- PASS: TestE/sub (0.00s)\n    --- PASS: TestF/sub (0.00s)\nPASS\n"
	got := NotPassed(out, []string{"TestA", "TestB", "TestC", "TestD", "TestE", "TestF", "TestG"})
	if want := []string{"TestB", "TestC", "TestD", "TestF", "TestG"}; !slices.Equal(got, want) {
		t.Errorf("NotPassed = %v, want %v", got, want)
	}
	if got := NotPassed(out, nil); got != nil {
		t.Errorf("NotPassed with no tests = %v, want none", got)
	}
}
