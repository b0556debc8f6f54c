// Package privtest holds helpers for tests that need root and a BPF-capable
// kernel: skipping with a reason (or failing when CI requires them; a missing
// hardware PMU skips even then, cross-checked with sysfs, see PMU), loading
// tiny real programs, running them an exact number of times, and serializing
// tests that depend on the kernel's global stats state.
package privtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/spin"
)

// RequireEnv is the environment variable CI sets so that a skipped
// privileged test fails instead.
const RequireEnv = "BPFPERF_REQUIRE_PRIVILEGED"

// Required reports whether privileged tests must run (CI).
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Skip skips the test with reason, or fails it when privileged tests are
// required.
func Skip(tb testing.TB, reason string) {
	tb.Helper()
	if Required() {
		tb.Fatalf("%s=1 but the test cannot run: %s", RequireEnv, reason)
	}
	tb.Skip(reason)
}

// Root skips unless the test runs as root on a kernel that can load BPF
// programs.
func Root(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Skip(tb, "needs root")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		Skip(tb, fmt.Sprintf("remove memlock rlimit: %v", err))
	}
	prog, err := LoadSocketFilter("privtest_probe")
	if err != nil {
		Skip(tb, fmt.Sprintf("kernel refuses a socket filter: %v", err))
	}
	prog.Close()
}

// LoadSocketFilter loads `r0 = 0; exit` as a socket filter named name.
// The caller owns the program and must close it.
func LoadSocketFilter(name string) (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.SocketFilter,
		License:      "MIT",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()},
	})
}

// Keep fails tb on err, the error of loading p; otherwise it closes p when
// tb ends and returns p's kernel id.
func Keep(tb testing.TB, p *ebpf.Program, err error) uint32 {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	info, err := p.Info()
	if err != nil {
		tb.Fatal(err)
	}
	id, _ := info.ID()
	return uint32(id)
}

// LoadLoop loads a socket filter named name that spins for iterations loop
// turns, so each run costs a measurable amount of time.
func LoadLoop(name string, iterations int32) (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.SocketFilter,
		License:      "MIT",
		Instructions: spin.Loop(iterations),
	})
}

// packet is the smallest input a socket filter's test run accepts: an
// Ethernet header.
var packet = make([]byte, 14)

// Run runs prog exactly n times through BPF_PROG_TEST_RUN. Each call uses
// repeat=1: with a larger repeat a pending signal aborts the batch midway
// and a retry would count some runs twice.
func Run(prog *ebpf.Program, n int) error {
	for i := 0; i < n; i++ {
		if _, err := prog.Run(&ebpf.RunOptions{Data: packet, Repeat: 1}); err != nil {
			return fmt.Errorf("test run %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// KeepRunning runs prog n times every period (0: back to back) until the
// test ends, so that every tick of a daemon sees it move.
func KeepRunning(tb testing.TB, prog *ebpf.Program, every time.Duration, n int) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(every):
				Run(prog, n)
			}
		}
	}()
	tb.Cleanup(func() { close(stop); <-done })
}

// LockStats serializes tests that assert on the kernel's global stats state
// and tests that start something holding stats on (a daemon): any process
// holding a BPF_ENABLE_STATS fd changes the state for everyone. The lock is
// an flock on a file shared by every test binary on the host, held until the
// test ends. It is reentrant within a process, so a test holding it may
// start a daemon whose helper takes it too.
func LockStats(tb testing.TB) {
	tb.Helper()
	statsLock.Lock()
	defer statsLock.Unlock()
	if statsHolds == 0 {
		path := filepath.Join(os.TempDir(), "bpfperf-test-stats.lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			tb.Fatalf("open stats lock: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			tb.Fatalf("lock stats: %v", err)
		}
		statsFile = f
	}
	statsHolds++
	tb.Cleanup(func() {
		statsLock.Lock()
		defer statsLock.Unlock()
		if statsHolds--; statsHolds == 0 {
			statsFile.Close()
			statsFile = nil
		}
	})
}

var (
	statsLock  sync.Mutex
	statsHolds int
	statsFile  *os.File
)

// StatsCounting reports whether the kernel counts run time right now: it
// runs a fresh program once and looks at its run_time_ns. Call it under
// LockStats.
func StatsCounting() (bool, error) {
	prog, err := LoadSocketFilter("privtest_stats")
	if err != nil {
		return false, err
	}
	defer prog.Close()
	if err := Run(prog, 1); err != nil {
		return false, err
	}
	st, err := prog.Stats()
	if err != nil {
		return false, fmt.Errorf("program stats: %w", err)
	}
	return st.RunCount > 0, nil
}

// LoadTailCallEntry loads a socket filter named name that tail-calls
// target through a one-slot program array, so the kernel charges target's
// runs to it. The caller owns both returned objects and must close them.
func LoadTailCallEntry(name string, target *ebpf.Program) (*ebpf.Program, *ebpf.Map, error) {
	jump, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("program array: %w", err)
	}
	if err := jump.Put(uint32(0), uint32(target.FD())); err != nil {
		jump.Close()
		return nil, nil, fmt.Errorf("put tail-call target: %w", err)
	}
	entry, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R2, jump.FD()),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnTailCall.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		jump.Close()
		return nil, nil, fmt.Errorf("load tail-call entry: %w", err)
	}
	return entry, jump, nil
}

// Exec runs a binary and returns its stdout, stderr and exit code (-1 when
// it could not run). One still running after a minute is killed, so a
// daemon that should have refused to start cannot hang a test or outlive
// it.
func Exec(name string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	case err != nil:
		return out.String(), err.Error(), -1
	}
	return out.String(), errOut.String(), 0
}

// Tracefs makes sure tracefs is reachable where tools look for
// tracepoints: /sys/kernel/tracing (bpftrace, bpftool) and
// /sys/kernel/debug/tracing, the only place Debian 12's libbpf-tools look
// (opensnoop leaves its open(2) programs out when it finds no
// sys_enter_open there). A fresh machine may have neither mounted. It
// mounts what is missing (debugfs, which brings tracefs under it), and
// skips (a failure under BPFPERF_REQUIRE_PRIVILEGED=1) if it cannot.
func Tracefs(tb testing.TB) {
	tb.Helper()
	// at is where fs is mounted to make tracefs reachable at dir.
	for _, m := range []struct{ dir, fs, at string }{
		{"/sys/kernel/tracing", "tracefs", "/sys/kernel/tracing"},
		{"/sys/kernel/debug/tracing", "debugfs", "/sys/kernel/debug"},
	} {
		if _, err := os.Stat(m.dir + "/events"); err == nil {
			continue
		}
		if err := unix.Mount(m.fs, m.at, m.fs, 0, ""); err != nil {
			Skip(tb, "tracefs is not reachable at "+m.dir+" and mounting "+m.fs+" at "+m.at+" failed: "+err.Error())
		}
		if _, err := os.Stat(m.dir + "/events"); err != nil {
			Skip(tb, "tracefs is not reachable at "+m.dir+" after mounting "+m.fs+": "+err.Error())
		}
	}
}

// BPFFS makes sure /sys/fs/bpf is a BPF filesystem, as systemd mounts it
// at boot, so that a test's loader can pin there: it mounts one where
// there is none (bpftool does the same for its own pins, so which test
// ran first decided whether the others could pin).
func BPFFS(tb testing.TB) {
	tb.Helper()
	const dir = "/sys/fs/bpf"
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil && fs.Type == unix.BPF_FS_MAGIC {
		return
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		Skip(tb, dir+" is not a BPF filesystem and mounting one failed: "+err.Error())
	}
}

// StatsCostByWallClock measures what BPF run-time stats add to a run by a
// mechanism of its own, for tests to check bpfperf's figure against: an
// empty socket filter test-run in batches of repeat, alternating stats off
// and on (a stats fd of its own), rounds times, each batch timed by Go's
// monotonic clock rather than the kernel's test-run duration. It returns
// the least ns per run off and on: the wall clock also counts time the
// test was preempted, which the kernel's test-run timer leaves out, so the
// quickest batch is the closest. Rounds are 10 ms apart, so they span
// the slow spells a VM's vCPU has (tens of ms in which every run with
// stats on is slower). A batch with stats off that the kernel counted
// means another holder: a skip (a failure in CI). The caller should hold
// LockStats.
func StatsCostByWallClock(tb testing.TB, rounds, repeat int) (off, on float64) {
	tb.Helper()
	prog, err := LoadSocketFilter("wallclock_cost")
	if err != nil {
		tb.Fatal(err)
	}
	defer prog.Close()
	runs := func() uint64 {
		s, err := prog.Stats()
		if err != nil {
			tb.Fatal(err)
		}
		return s.RunCount
	}
	batch := func() float64 {
		start := time.Now()
		if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64), Repeat: uint32(repeat)}); err != nil {
			tb.Fatal(err)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(repeat)
	}
	off, on = math.Inf(1), math.Inf(1)
	for round := range rounds {
		if round > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		before := runs()
		off = min(off, batch())
		if runs() != before {
			Skip(tb, "BPF run-time stats went on while the test held them off: a holder outside the test suite")
		}
		stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
		if err != nil {
			tb.Fatal(err)
		}
		on = min(on, batch())
		stats.Close()
	}
	return off, on
}
